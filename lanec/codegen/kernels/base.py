"""What every kernel class is (`Kernel`) and the one way a kernel launches its body (`launch`).

A kernel class keeps only its static specialization (validated by its spec in facts.py), lists
its tensors (`params()`, in entry order) and computes its launch (`launch()`) in plain Python, so
the plan writer and the `@cute.jit __call__` cannot drift. The launch ABI itself (`LaunchShape`,
`TensorParam`) is the runtime's."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from lanec.runtime.launch import LaunchShape, TensorParam


class Kernel(Protocol):
    """A lane kernel. `name` is the registry's; `params()` its tensors in entry order (one
    8-byte pointer each); `launch()` its grid, block, cluster, shared memory and PDL. Its
    `@cute.jit __call__` takes the tensors by name, keyword-only (an optional tensor the
    specialization does not take defaults to None), and calls `launch(self, ...)` once; its
    `@cute.kernel kernel` is the body, taking them in entry order."""

    name: ClassVar[str]

    def params(self) -> list[TensorParam]: ...

    def launch(self) -> LaunchShape: ...

    def __call__(self, **tensors: Any) -> None: ...

    def kernel(self, *tensors: Any) -> Any: ...


def launch(kernel: Kernel, *tensors: Any, min_blocks_per_mp: int = 0) -> None:
    """Launch `kernel`'s body on `tensors` at `kernel.launch()`: its grid, block, cluster and
    shared memory, PDL as the shape says. A minimum of CTAs per SM also names the shared-memory
    carveout (all of it): otherwise the DSL asks a GPU for the SM's shared memory, and the
    compile machine has none."""
    shape = kernel.launch()
    carveout = {"preferred_smem_carveout": 100} if min_blocks_per_mp > 1 else {}
    kernel.kernel(*tensors).launch(grid=list(shape.grid), block=list(shape.block), cluster=list(shape.cluster),
                                   smem=shape.shared_bytes, use_pdl=shape.pdl, min_blocks_per_mp=min_blocks_per_mp,
                                   **carveout)


RELEASES = ("wait", "entry")  # where a launch releases its PDL dependents (the lowering's `release_point`)


def released(kernel: Kernel, release: str = "wait") -> Kernel:
    """`kernel` releasing its PDL dependents at `release`: "wait" (the kernel's own place, after its
    wait or once its inputs are read) or "entry" (its body's first statement). The point is a
    launch's, chosen by the lowering from what follows it; an "entry" kernel carries it as an
    attribute, so its cubin is cached apart and a "wait" kernel's is the one it always was."""
    if release not in RELEASES:
        raise ValueError(f"{kernel.name}: release {release!r}: 'wait' or 'entry'")
    if release == "entry":
        kernel.release = "entry"
    return kernel


def split_release(spec: dict) -> tuple[dict, str]:
    """A launch's specialization as its kernel class takes it, and the launch's release point (its
    `release`, "wait" where it has none): the lowering records the point in the spec beside the rest."""
    return {k: v for k, v in spec.items() if k != "release"}, spec.get("release", "wait")


def releases_at_entry(kernel: Kernel) -> bool:
    return getattr(kernel, "release", "wait") == "entry"


def release_dependents_at_entry(kernel: Kernel) -> None:
    """The first statement of every kernel body: where the launch releases at its entry (`released`),
    its PDL dependents may launch as soon as every CTA of this grid has started (they read nothing of
    its outputs before their own PDL wait, which waits for this grid's end)."""
    if releases_at_entry(kernel):
        import cutlass.cute as cute

        cute.arch.griddepcontrol_launch_dependents()


def release_dependents(kernel: Kernel) -> None:
    """Where a kernel releases its PDL dependents after its entry (after its wait, or once its inputs
    are read): a no-op where the launch released them at its entry."""
    if not releases_at_entry(kernel):
        import cutlass.cute as cute

        cute.arch.griddepcontrol_launch_dependents()


CACHES = ("k_cache", "v_cache", "cache")  # params a kernel writes a few rows of and reads
STATES = ("state", "conv_state")  # params a kernel reads and writes back (a request's recurrent state)


def traffic(kernel: Kernel) -> dict[str, int]:
    """The bytes a launch of `kernel` moves at most: {"read": ..., "written": ...}, each param's view
    (its shape's elements, not its pitch's span). A kernel that reads only some entries of a param's
    first axis names them in `touched()` ({param: entries}: an embed's table rows, a mixture's
    chosen experts, an attention's pages a full page table reaches). A cache param (`CACHES`) counts
    as read: the step writes a few rows of it and reads the rest; a state (`STATES`) as read and
    written."""
    from lanec.runtime import dtypes

    touched = kernel.touched() if hasattr(kernel, "touched") else {}
    moved = {"read": 0, "written": 0}
    for param in kernel.params():
        if param.tensor_map is not None:  # 128 bytes of the map: the copies it drives count as `of`'s
            continue
        elements = 1
        for n in param.shape:
            elements *= n
        if param.name in touched and param.shape:
            elements = elements // param.shape[0] * min(param.shape[0], touched[param.name])
        nbytes = elements * dtypes.storage(param.dtype).itemsize
        if param.name in STATES:
            moved["read"] += nbytes
            moved["written"] += nbytes
        else:
            moved["written" if param.written and param.name not in CACHES else "read"] += nbytes
    return moved

