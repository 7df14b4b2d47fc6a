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
