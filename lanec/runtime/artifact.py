"""One compiled kernel on disk: `<stem>.cubin` (the sm_90a machine code) and `<stem>.json` (its
entry name, its tensor parameters in entry order, its launch shape). The compiler writes them; the
runtime and the GPU tests read them back here with numpy and the standard library only, because
the GPU machine has no CuTe DSL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lanec.runtime.launch import LaunchShape, TensorParam

# Bumped whenever the `.json` layout changes: an older reader must refuse a newer file.
ARTIFACT_VERSION = 1


class ArtifactError(ValueError):
    """A missing, truncated or foreign artifact, as one line."""


@dataclass(frozen=True)
class KernelArtifact:
    """A kernel as the runtime needs it: `entry` is the cubin's kernel symbol, `params` the
    tensors it takes (one 8-byte pointer each, in this order), `launch` its grid, block, cluster
    and dynamic shared memory."""

    name: str
    entry: str
    cubin: bytes
    params: tuple[TensorParam, ...]
    launch: LaunchShape

    def describe(self) -> dict:
        return {"version": ARTIFACT_VERSION, "name": self.name, "entry": self.entry,
                "params": [p.to_json() for p in self.params], "launch": self.launch.to_json()}

    def save(self, directory: str | Path, stem: str) -> Path:
        """Write `<stem>.cubin` and `<stem>.json` under `directory`; returns the `.json` path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{stem}.cubin").write_bytes(self.cubin)
        path = directory / f"{stem}.json"
        path.write_text(json.dumps(self.describe(), indent=1) + "\n")
        return path


def load_artifact(directory: str | Path, stem: str) -> KernelArtifact:
    """Read back what `KernelArtifact.save(directory, stem)` wrote."""
    directory = Path(directory)
    meta_path, cubin_path = directory / f"{stem}.json", directory / f"{stem}.cubin"
    for path in (meta_path, cubin_path):
        if not path.is_file():
            raise ArtifactError(f"{path}: no such kernel artifact (build it first: "
                                "python tests/gpu/build.py)")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{meta_path}: not a kernel artifact ({exc.msg} at line {exc.lineno})") from None
    version = meta.get("version") if isinstance(meta, dict) else None
    if version != ARTIFACT_VERSION:
        raise ArtifactError(f"{meta_path}: artifact version {version!r}, this lanec reads {ARTIFACT_VERSION}")
    cubin = cubin_path.read_bytes()
    if cubin[:4] != b"\x7fELF":
        raise ArtifactError(f"{cubin_path}: not a cubin (no ELF header)")
    try:
        return KernelArtifact(meta["name"], meta["entry"], cubin,
                              tuple(TensorParam.from_json(p) for p in meta["params"]),
                              LaunchShape.from_json(meta["launch"]))
    except (KeyError, TypeError) as exc:
        raise ArtifactError(f"{meta_path}: malformed kernel artifact ({type(exc).__name__}: {exc})") from None
