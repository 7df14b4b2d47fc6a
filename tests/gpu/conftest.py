"""GPU tests: skipped, each with the reason, where there is no usable GPU (no cuda-python, no
driver, no device, or a device that is not sm_90). Fixtures for every GPU test: the device, a
stream, and `gpu_artifact(name)`, which reads what was compiled on the CPU machine into
build/gpu/ (`name.cubin`, and `name.json` with its launch facts) and carried here."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from lanec.runtime import driver

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "gpu"


@functools.cache
def _unusable() -> str | None:
    """Why this machine cannot run the GPU tests, or None when it can."""
    try:
        driver.Device(0)
    except driver.DeviceError as exc:
        return str(exc)
    return None


def shard(text: str) -> tuple[int, int]:
    """LANEC_KDA_SHARD=i/n: the i-th of n interleaved parts of the chosen KdaSplit cases
    (1-based), so a long grid splits over GPU commands of at most 10 minutes. (0-based i, n)."""
    try:
        index, count = (int(v) for v in text.split("/"))
    except ValueError:
        index = count = 0
    if not 1 <= index <= count:
        raise pytest.UsageError(f"LANEC_KDA_SHARD={text!r}: write i/n with 1 <= i <= n (e.g. 2/3)")
    return index - 1, count


def pytest_configure(config):
    import os

    shard(os.environ.get("LANEC_KDA_SHARD", "1/1"))  # a bad value stops the run before collection


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    gpu_items = [item for item in items if here in Path(str(item.fspath)).resolve().parents]
    if not gpu_items:
        return
    reason = _unusable()
    for item in gpu_items:
        item.add_marker(pytest.mark.gpu)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"no usable GPU: {reason}"))


@pytest.fixture(scope="session")
def device() -> driver.Device:
    return driver.Device(0)


@pytest.fixture
def stream(device) -> driver.Stream:
    stream = driver.Stream()
    yield stream
    stream.synchronize()
    stream.destroy()


@dataclass(frozen=True)
class Artifact:
    """A cubin compiled on the CPU machine and its launch facts (the JSON written beside it)."""

    name: str
    cubin: bytes
    facts: dict

    def module(self) -> driver.Module:
        return driver.Module(self.cubin)


@pytest.fixture(scope="session")
def gpu_artifact(device):
    """`gpu_artifact(name)` -> Artifact from build/gpu/; a missing one fails the test with how to
    make it (a skip would hide a build that was never carried)."""
    loaded: dict[str, Artifact] = {}

    def load(name: str) -> Artifact:
        if name not in loaded:
            cubin = ARTIFACTS / f"{name}.cubin"
            if not cubin.is_file():
                pytest.fail(f"{cubin} is missing: compile it on the CPU machine and carry build/ to the GPU",
                            pytrace=False)
            facts_path = cubin.with_suffix(".json")
            facts = json.loads(facts_path.read_text()) if facts_path.is_file() else {}
            loaded[name] = Artifact(name, cubin.read_bytes(), facts)
        return loaded[name]

    return load
