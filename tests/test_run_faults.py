"""The faults `lanec run` meets before a step runs, each a one-line error with nothing written to the
GPU: a plan larger than the free GPU memory (what it needs, by role, and what is free), a GPU of
another architecture, a checkpoint missing a tensor, holding one of the wrong shape or dtype, or a
shard cut short. The GPU is a stand-in driver (`FakeDriver`: the device facts a test gives, and no
call that allocates, copies or loads), so every test runs without a GPU, and a call past the fault
would fail on the missing function."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from tiny_plan import DIM, ROWS, VOCAB, embed_plan

from lanec.cli import main
from lanec.runtime import driver, runner
from lanec.runtime.plan import Buffer, Plan

safetensors_numpy = pytest.importorskip("safetensors.numpy")



class FakeDriver:
    """cuda.bindings.driver as far as `driver.Device` and `Device.free_bytes` use it: one GPU of
    compute capability `capability` with `free` bytes free; `calls` records what was asked."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_OUT_OF_MEMORY = 2
        CUDA_ERROR_NO_DEVICE = 100

    class CUdevice_attribute:
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = "major"
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = "minor"
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = "sms"

    def __init__(self, name: str, capability: tuple[int, int], free: int):
        self.name, self.capability, self.free = name, capability, free
        self.calls: list[str] = []

    def _called(self, name: str, *values):
        self.calls.append(name)
        return (self.CUresult.CUDA_SUCCESS, *values)

    def cuInit(self, flags):
        return self._called("cuInit")

    def cuDeviceGetCount(self):
        return self._called("cuDeviceGetCount", 1)

    def cuDeviceGet(self, ordinal):
        return self._called("cuDeviceGet", ordinal)

    def cuDeviceGetName(self, length, handle):
        return self._called("cuDeviceGetName", self.name.encode() + b"\0" * 8)

    def cuDeviceGetAttribute(self, attribute, handle):
        facts = {"major": self.capability[0], "minor": self.capability[1], "sms": 132}
        return self._called("cuDeviceGetAttribute", facts[attribute])

    def cuDevicePrimaryCtxRetain(self, handle):
        return self._called("cuDevicePrimaryCtxRetain", "context")

    def cuCtxSetCurrent(self, context):
        return self._called("cuCtxSetCurrent")

    def cuMemGetInfo(self):
        return self._called("cuMemGetInfo", self.free, 141 * 2**30)


@pytest.fixture
def gpu(monkeypatch):
    """Install a FakeDriver as the runtime's CUDA driver: `gpu(name, capability, free)`."""

    def install(name: str = "NVIDIA H200", capability: tuple[int, int] = (9, 0), free: int = 100 * 2**30):
        fake = FakeDriver(name, capability, free)
        monkeypatch.setattr(driver, "cu", fake)
        monkeypatch.setattr(driver, "_initialized", False)
        return fake

    return install


def one_line_error(*arguments) -> str:
    result = CliRunner().invoke(main, ["run", *map(str, arguments)])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("Error: ")
    return result.output


# -- the GPU -----------------------------------------------------------------------------------

def test_a_plan_larger_than_the_free_memory_says_what_it_needs(tmp_path, gpu):
    embed_plan(tmp_path / "plan.bin")
    fake = gpu(free=10_000)
    output = one_line_error(tmp_path / "plan.bin")
    needed = sum(b.nbytes for b in Plan.read(tmp_path / "plan.bin").buffers)
    assert f"the plan needs {needed / 1024:.2f} KiB of buffers" in output and "NVIDIA H200 has 9.77 KiB free" in output
    assert "weights" in output and "activations and inputs" in output
    assert fake.calls[-1] == "cuMemGetInfo"  # nothing allocated, loaded or copied after it


def test_the_memory_check_names_gib_by_role():
    plan = Plan(program="{}", form="")
    plan.buffers = [Buffer("w", (50, 2**30), "bfloat16", "weight"), Buffer("cache", (4, 2**30), "bfloat16", "state"),
                    Buffer("x", (2**20,), "float32", "activation")]
    with pytest.raises(driver.DeviceError) as raised:
        runner.check_memory(plan, 80 * 2**30, "NVIDIA H200")
    assert str(raised.value) == ("the plan needs 108.00 GiB of buffers (100.00 GiB weights, 8.00 GiB states and "
                                 "caches, 4.00 MiB activations and inputs); NVIDIA H200 has 80.00 GiB free")
    runner.check_memory(plan, 108 * 2**30 + 4 * 2**20, "NVIDIA H200")  # just enough


def test_a_stream_k_launch_refuses_a_gpu_of_too_few_sms():
    """Its CTAs wait on each other's partial tiles: all must be resident at once, one an SM."""
    from types import SimpleNamespace

    plan = Plan(program="{}", form="")
    plan.launches = [SimpleNamespace(name="gemm_tc o_proj 0", spec={"rows": 64, "schedule": {"splits": 4}}),
                     SimpleNamespace(name="gemm_tc qkv 0", spec={"rows": 256, "schedule": {"stream": 132}})]
    with pytest.raises(driver.DeviceError) as raised:
        runner.check_residency(plan, 114, "NVIDIA H100 PCIe")
    assert str(raised.value) == ("launch 'gemm_tc qkv 0' is stream-K over 132 CTAs that wait on each other, all "
                                 "resident at once, one an SM; NVIDIA H100 PCIe has 114 SMs")
    runner.check_residency(plan, 132, "NVIDIA H200")  # enough


@pytest.mark.parametrize("name, capability", [("NVIDIA A100-SXM4-80GB", (8, 0)), ("NVIDIA B200", (10, 0))])
def test_a_gpu_of_another_architecture_is_refused(tmp_path, gpu, name, capability):
    embed_plan(tmp_path / "plan.bin")
    fake = gpu(name, capability)
    output = one_line_error(tmp_path / "plan.bin")
    major, minor = capability
    assert f"GPU 0 ({name}) is sm_{major}{minor}: lanec's kernels are built for sm_90a" in output
    assert "cuDevicePrimaryCtxRetain" not in fake.calls  # refused before a context is made


# -- the checkpoint ----------------------------------------------------------------------------

def tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    return {name: rng.standard_normal(shape).astype(np.float32)
            for name, shape in (("embed", (VOCAB, DIM)), ("w.q", (ROWS, DIM)), ("w.k", (ROWS, DIM)))}


def test_the_whole_checkpoint_loads(tmp_path, gpu):
    """The faults below are each one change of this checkpoint, which the plan takes."""
    embed_plan(tmp_path / "plan.bin")
    safetensors_numpy.save_file(tensors(), str(tmp_path / "model.safetensors"))
    result = CliRunner().invoke(main, ["run", str(tmp_path / "plan.bin"), "--interpret", "--weights",
                                       str(tmp_path / "model.safetensors")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("change, message", [
    (lambda t: t.pop("w.k"), "has no tensor 'w.k' (weight 'wqk' needs it)"),
    (lambda t: t.update({"w.k": t["w.k"].T.copy()}), "tensor 'w.k' is [64, 32]; the plan expects [32, 64]"),
    (lambda t: t.update({"w.k": t["w.k"].astype(np.int32)}),
     "tensor 'w.k' holds int32 values; weight 'wqk' needs bfloat16 (floating point)"),
])
def test_a_checkpoint_fault_is_one_line_before_the_gpu_is_touched(tmp_path, gpu, change, message):
    embed_plan(tmp_path / "plan.bin")
    held = tensors()
    change(held)
    safetensors_numpy.save_file(held, str(tmp_path / "model.safetensors"))
    fake = gpu()
    output = one_line_error(tmp_path / "plan.bin", "--weights", tmp_path / "model.safetensors")
    assert message in output
    assert fake.calls == []  # the checkpoint is read, and refused, before the GPU is opened


def test_a_truncated_shard_is_named_when_it_is_opened(tmp_path, gpu):
    embed_plan(tmp_path / "plan.bin")
    folder = tmp_path / "model"
    folder.mkdir()
    held = tensors()
    shards = {"model-00001-of-00002.safetensors": ["embed"], "model-00002-of-00002.safetensors": ["w.q", "w.k"]}
    for file, names in shards.items():
        safetensors_numpy.save_file({n: held[n] for n in names}, str(folder / file))
    index = {"weight_map": {n: file for file, names in shards.items() for n in names}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    shard = folder / "model-00002-of-00002.safetensors"
    whole = shard.read_bytes()
    shard.write_bytes(whole[:-100])  # the header whole, the last tensor's data 100 bytes short
    fake = gpu()
    output = one_line_error(tmp_path / "plan.bin", "--weights", folder)
    header = json.loads(whole[8:8 + int.from_bytes(whole[:8], "little")])
    last = max((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][1])
    assert f"model-00002-of-00002.safetensors is truncated: its header places tensor '{last}' up to byte" in output
    assert "(100 bytes missing)" in output and fake.calls == []
