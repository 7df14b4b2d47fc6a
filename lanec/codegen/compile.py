"""Ahead-of-time compilation of one kernel specialization to an sm_90a cubin, with a content-hash
cache. No GPU is needed: CuTe DSL compiles against fake tensors that carry only the static shapes,
strides and dtypes of the kernel's parameters.

A kernel object is an instance of a kernel class (lanec/codegen/kernels/): its instance
attributes are its static specialization, `params()` lists its tensors in entry order, `launch()`
its grid, block, cluster and shared memory, `name` says which kernel it is, and its `@cute.jit
__call__` takes one tensor per param, by the param's name (lanec/codegen/kernels/base.py's
`Kernel`)."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lanec.runtime import dtypes
from lanec.runtime.artifact import KernelArtifact
from lanec.runtime.launch import LaunchShape, TensorParam

ARCH = "sm_90a"
# Set before CuTe DSL is first imported: it reads the target at its first compile and would
# otherwise probe for a GPU (there is none on a compile machine).
os.environ["CUTE_DSL_ARCH"] = ARCH

# Kernel bases must be 16-byte aligned: every kernel reads and writes 16-byte vectors.
TENSOR_ALIGN = 16


class CompileError(RuntimeError):
    """A kernel that did not compile, or compiled to something the runtime cannot launch."""


@dataclass(frozen=True)
class CompiledKernel(KernelArtifact):
    """A compiled kernel: the artifact the runtime loads, plus its PTX (for tests and for reading)
    and whether it came from the cache."""

    ptx: str = ""
    from_cache: bool = field(default=False, compare=False)

    def artifact(self) -> KernelArtifact:
        return KernelArtifact(self.name, self.entry, self.cubin, self.params, self.launch)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lanec"


def _dsl_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-cutlass-dsl")
    except PackageNotFoundError:
        import cutlass

        return getattr(cutlass, "__version__", "unknown")


def _source_files(kernel) -> list[Path]:
    """The kernel's class module, its bases' modules, and every lanec module they draw names from
    (shared primitives, base classes): a change to any of them changes the generated code."""
    modules = {type(kernel).__module__} | {c.__module__ for c in type(kernel).__mro__}
    files = set()
    for module_name in modules:
        module = sys.modules.get(module_name)
        if module is None or not module_name.startswith("lanec"):
            continue
        files.add(Path(inspect.getfile(module)))
        for value in vars(module).values():
            owner = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
            if isinstance(owner, str) and owner.startswith("lanec.") and owner in sys.modules:
                source = getattr(sys.modules[owner], "__file__", None)
                if source:
                    files.add(Path(source))
    return sorted(files)


def cache_key(kernel) -> str:
    """Hash of everything that decides the cubin: the sources, the class, the static
    specialization (instance attributes), the parameters, the launch, the DSL version, the arch."""
    digest = hashlib.sha256()
    for path in _source_files(kernel):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    spec = sorted((k, repr(v)) for k, v in vars(kernel).items())
    for part in (type(kernel).__qualname__, repr(spec), repr(kernel.params()), repr(kernel.launch()),
                 _dsl_version(), ARCH):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:32]


def _fake_tensor(param: TensorParam):
    from cutlass.cute.runtime import make_fake_tensor

    try:
        element = dtypes.cute_type(param.dtype)
    except ValueError as exc:
        raise CompileError(f"param {param.name}: {exc}") from None
    return make_fake_tensor(element, tuple(param.shape), param.element_strides, assumed_align=TENSOR_ALIGN)


_ENTRY = re.compile(r"\.visible\s+\.entry\s+(\w+)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+\w+(?:\[(\d+)\])?")


def entry_signature(ptx: str) -> tuple[str, list[int]]:
    """The PTX's one kernel entry: its name and the byte size of each parameter."""
    entries = _ENTRY.findall(ptx)
    if len(entries) != 1:
        raise CompileError(f"expected one kernel entry in the PTX, found {len(entries)}")
    name, body = entries[0]
    sizes = []
    for kind, count in _PARAM.findall(body):
        width = {"b8": 1, "b16": 2, "b32": 4, "b64": 8, "u64": 8, "u32": 4, "s32": 4, "s64": 8}.get(kind, 0)
        sizes.append(width * int(count or 1))
    return name, sizes


def _check_entry(name: str, ptx: str, params: list[TensorParam]) -> str:
    entry, sizes = entry_signature(ptx)
    if sizes != [8] * len(params):
        raise CompileError(f"{name}: entry {entry} takes parameters of {sizes} bytes; the runtime passes one "
                           f"8-byte pointer per tensor ({len(params)}: {[p.name for p in params]}). A tensor "
                           "with a dynamic dimension takes a struct: give every tensor a static shape")
    return entry


def _load_cached(directory: Path, key: str, name: str) -> CompiledKernel | None:
    meta_path, cubin_path, ptx_path = (directory / f"{key}{ext}" for ext in (".json", ".cubin", ".ptx"))
    if not (meta_path.is_file() and cubin_path.is_file() and ptx_path.is_file()):
        return None
    try:
        meta = json.loads(meta_path.read_text())
        params = tuple(TensorParam.from_json(p) for p in meta["params"])
        launch = LaunchShape.from_json(meta["launch"])
        entry = meta["entry"]
    except (ValueError, KeyError, TypeError):
        return None  # a damaged entry is rebuilt, never trusted
    return CompiledKernel(name, entry, cubin_path.read_bytes(), params, launch, ptx_path.read_text(),
                          from_cache=True)


def _store_cached(directory: Path, key: str, compiled: CompiledKernel) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for ext, data in ((".cubin", compiled.cubin), (".ptx", compiled.ptx.encode()),
                      (".json", json.dumps(compiled.describe(), indent=1).encode())):
        # write then rename: a concurrent reader sees a whole file or none (.json goes last)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key}", suffix=ext)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, directory / f"{key}{ext}")


def compile_kernel(kernel, cache_dir: str | Path | None = None, use_cache: bool = True) -> CompiledKernel:
    """Compile `kernel` for sm_90a (or take it from the cache under `cache_dir`, by default
    `$XDG_CACHE_HOME/lanec` or `~/.cache/lanec`)."""
    name = kernel.name
    params, launch = list(kernel.params()), kernel.launch()
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = cache_key(kernel)
    if use_cache:
        cached = _load_cached(directory, key, name)
        if cached is not None:
            return cached

    import cutlass.cute as cute

    fakes = {p.name: _fake_tensor(p) for p in params}
    with tempfile.TemporaryDirectory(prefix="lanec-compile-") as dump:
        options = f"--gpu-arch={ARCH} --keep-cubin --keep-ptx --dump-dir={dump}"
        try:
            compiled = cute.compile(kernel, **fakes, options=options)
        except Exception as exc:
            raise CompileError(f"{name}: CuTe DSL compile failed: {type(exc).__name__}: {exc}") from exc
        artifacts = compiled.artifacts
        ptx, cubin = artifacts.PTX, artifacts.CUBIN
        if ptx is None or cubin is None:  # fall back on the dumped files
            ptx_files, cubin_files = sorted(Path(dump).glob("*.ptx")), sorted(Path(dump).glob("*.cubin"))
            if len(ptx_files) != 1 or len(cubin_files) != 1:
                raise CompileError(f"{name}: the compiler left {len(ptx_files)} PTX and {len(cubin_files)} "
                                   "cubin files; expected one of each")
            ptx, cubin = ptx_files[0].read_text(), cubin_files[0].read_bytes()
    entry = _check_entry(name, ptx, params)
    result = CompiledKernel(name, entry, bytes(cubin), tuple(params), launch, ptx)
    if use_cache:
        _store_cached(directory, key, result)
    return result
