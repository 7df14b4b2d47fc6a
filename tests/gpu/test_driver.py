"""The runtime's driver on the GPU: a CuTe DSL kernel compiled on the CPU machine (run this file
with `python tests/gpu/test_driver.py --build` there; it writes build/gpu/driver_scaled_add.*),
launched eagerly, with clusters (portable and 16 CTAs), with more than 48 KB of dynamic shared
memory, back to back with PDL, and replayed from a CUDA graph; every result against numpy on fresh
random inputs, outputs poisoned with NaN first.

The kernel: `out[i] = a[i] + b[i] * (1 + rank)`, rank the CTA's rank in its cluster, after a
cluster barrier and `griddepcontrol.wait`; so a launch that drops the cluster attribute gives a
visibly wrong result, and a PDL chain that reads its predecessor too early reads NaN."""


import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lanec.runtime import driver
from lanec.runtime.launch import LaunchShape

NAME = "driver_scaled_add"
ELEMENTS = 1 << 16
THREADS = 128  # the PTX carries .reqntid 128: the block is fixed at compile time


def build(out_dir: Path) -> Path:
    """Compile the test kernel for sm_90a with CuTe DSL (CPU machine only)."""
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor

    @cute.kernel
    def scaled_add_kernel(a: cute.Tensor, b: cute.Tensor, out: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        rank = cute.arch.block_idx_in_cluster()
        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
        # the predecessor in a PDL chain writes `a`: wait for it right before the first read
        cute.arch.griddepcontrol_wait()
        i = bidx * THREADS + tidx
        out[i] = a[i] + b[i] * cutlass.Float32(rank + 1)
        cute.arch.griddepcontrol_launch_dependents()

    @cute.jit
    def scaled_add(a: cute.Tensor, b: cute.Tensor, out: cute.Tensor):
        scaled_add_kernel(a, b, out).launch(grid=(ELEMENTS // THREADS, 1, 1), block=(THREADS, 1, 1),
                                            cluster=(2, 1, 1))

    tensors = [make_fake_compact_tensor(cutlass.Float32, (ELEMENTS,), assumed_align=16) for _ in range(3)]
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        compiled = cute.compile(scaled_add, *tensors, options=f"--keep-cubin --dump-dir={scratch}")
        (cubin,) = Path(scratch).glob("*.cubin")
        data = cubin.read_bytes()
    (entry,) = compiled.kernel_info
    (out_dir / f"{NAME}.cubin").write_bytes(data)
    (out_dir / f"{NAME}.json").write_text(json.dumps({"entry": entry, "elements": ELEMENTS, "threads": THREADS}))
    return out_dir / f"{NAME}.cubin"


def shape(cluster: int = 1, pdl: bool = False, shared_bytes: int = 0) -> LaunchShape:
    return LaunchShape(grid=(ELEMENTS // THREADS, 1, 1), block=(THREADS, 1, 1), cluster=(cluster, 1, 1),
                       shared_bytes=shared_bytes, pdl=pdl)


def multiplier(cluster: int) -> np.ndarray:
    """1 + each element's CTA rank in its cluster."""
    block = np.arange(ELEMENTS) // THREADS
    return (1 + block % cluster).astype(np.float32)


@pytest.fixture
def kernel(gpu_artifact):
    artifact = gpu_artifact(NAME)
    assert artifact.facts["elements"] == ELEMENTS and artifact.facts["threads"] == THREADS
    return artifact.module().function(artifact.facts["entry"])


@pytest.fixture
def rng(request):
    return np.random.default_rng(abs(hash(request.node.name)) % 2**32)


def fresh(rng) -> tuple[np.ndarray, np.ndarray]:
    return (rng.standard_normal(ELEMENTS).astype(np.float32), rng.standard_normal(ELEMENTS).astype(np.float32))


def poisoned(count: int = 1) -> list[driver.Buffer]:
    buffers = [driver.Buffer.empty(ELEMENTS * 4) for _ in range(count)]
    for buffer in buffers:
        buffer.fill(0xFF)
    return buffers


def read(buffer: driver.Buffer) -> np.ndarray:
    return buffer.to_array(np.float32, (ELEMENTS,))


def test_device_is_hopper(device):
    assert device.capability == (9, 0)
    assert device.sm_count >= 100
    assert "H" in device.name


def test_buffer_round_trip_and_poison(rng, device):
    host = rng.standard_normal((64, 33)).astype(np.float32)
    buffer = driver.Buffer.from_array(host)
    assert buffer.nbytes == host.nbytes and buffer.ptr != 0
    np.testing.assert_array_equal(buffer.to_array(np.float32, host.shape), host)
    buffer.fill(0xFF)
    assert np.isnan(buffer.to_array(np.float32, host.shape)).all()
    with pytest.raises(driver.DeviceError, match="reading"):
        buffer.to_array(np.float32, (3,))
    buffer.free()
    assert buffer.ptr == 0


@pytest.mark.parametrize("cluster", [1, 2, 16])
def test_eager_launch_with_cluster(kernel, stream, rng, cluster):
    a, b = fresh(rng)
    (out,) = poisoned()
    driver.launch(kernel, shape(cluster), [driver.Buffer.from_array(a).ptr, driver.Buffer.from_array(b).ptr,
                                           out.ptr], stream)
    stream.synchronize()
    np.testing.assert_allclose(read(out), a + b * multiplier(cluster), rtol=1e-6, atol=1e-6)


def test_large_dynamic_shared_memory(kernel, stream, rng):
    a, b = fresh(rng)
    (out,) = poisoned()
    driver.launch(kernel, shape(2, shared_bytes=160 * 1024),
                  [driver.Buffer.from_array(a).ptr, driver.Buffer.from_array(b).ptr, out.ptr], stream)
    np.testing.assert_allclose(read(out), a + b * multiplier(2), rtol=1e-6, atol=1e-6)


def chain(kernel, stream, a_buf, b_buf, middle, out, pdl: bool) -> None:
    """Two dependent launches: middle = a + b*m, out = middle + b*m."""
    driver.launch(kernel, shape(2, pdl=pdl), [a_buf.ptr, b_buf.ptr, middle.ptr], stream)
    driver.launch(kernel, shape(2, pdl=pdl), [middle.ptr, b_buf.ptr, out.ptr], stream)


def test_pdl_chain(kernel, stream, rng):
    a, b = fresh(rng)
    middle, out = poisoned(2)
    a_buf, b_buf = driver.Buffer.from_array(a), driver.Buffer.from_array(b)
    for _ in range(3):  # back to back repeatedly: the dependent launch must still see its input
        chain(kernel, stream, a_buf, b_buf, middle, out, pdl=True)
    np.testing.assert_allclose(read(out), a + 2 * b * multiplier(2), rtol=1e-5, atol=1e-5)


def test_graph_replay_reads_current_buffers(kernel, stream, rng):
    a_buf, b_buf = driver.Buffer.empty(ELEMENTS * 4), driver.Buffer.empty(ELEMENTS * 4)
    middle, out = poisoned(2)
    graph = driver.Graph.capture(stream, lambda: chain(kernel, stream, a_buf, b_buf, middle, out, pdl=True))
    for _ in range(2):  # fresh inputs and poisoned outputs before each replay
        a, b = fresh(rng)
        a_buf.upload(a)
        b_buf.upload(b)
        middle.fill(0xFF)
        out.fill(0xFF)
        graph.replay(stream)
        stream.synchronize()
        np.testing.assert_allclose(read(out), a + 2 * b * multiplier(2), rtol=1e-5, atol=1e-5)
    graph.destroy()


def test_timing_and_occupancy(kernel, stream, rng):
    a_buf, b_buf = (driver.Buffer.from_array(x) for x in fresh(rng))
    middle, out = poisoned(2)
    graph = driver.Graph.capture(stream, lambda: chain(kernel, stream, a_buf, b_buf, middle, out, pdl=True))
    microseconds = driver.time_us(stream, lambda: graph.replay(stream), repeats=10)
    assert 0.5 < microseconds < 1000, microseconds
    assert driver.occupancy_clusters(kernel, shape(2)) >= 1
    assert driver.occupancy_clusters(kernel, shape(16)) >= 1
    print(f"graph of two PDL cluster launches: {microseconds:.2f} us")


def test_a_graph_of_launches_with_l2_windows_computes_the_same(device, kernel, stream, rng):
    """The states' L2 windows (LANEC_L2_STATES) are a cache hint: the set-aside is taken and given back, and a
    captured PDL chain whose launches carry persisting windows over its inputs still adds what it adds."""
    most, widest = device.persisting_l2_max()
    assert most > 0 and widest >= ELEMENTS * 4
    a, b = fresh(rng)
    a_buf, b_buf = driver.Buffer.from_array(a), driver.Buffer.from_array(b)
    middle, out = poisoned(2)
    assert 0 < device.set_persisting_l2(ELEMENTS * 8) <= most
    try:
        windows = [driver.AccessWindow(a_buf.ptr, ELEMENTS * 4, 1.0), driver.AccessWindow(middle.ptr, ELEMENTS * 4, 0.5)]
        launches = [driver.Launch(kernel, shape(2), [a_buf.ptr, b_buf.ptr, middle.ptr], stream, windows[0]),
                    driver.Launch(kernel, shape(2), [middle.ptr, b_buf.ptr, out.ptr], stream, windows[1])]
        graph = driver.Graph.capture(stream, lambda: [launch.enqueue() for launch in launches])
        graph.replay(stream)
        stream.synchronize()
        np.testing.assert_allclose(read(out), a + 2 * b * multiplier(2), rtol=1e-5, atol=1e-5)
        graph.destroy()
    finally:
        assert device.set_persisting_l2(0) == 0


def test_driver_errors_are_one_line(device):
    with pytest.raises(driver.DeviceError) as error:
        driver.Module(b"not a cubin at all")
    assert "\n" not in str(error.value) and "CUDA_ERROR" in str(error.value)
    with pytest.raises(driver.DeviceError) as error:
        driver.Buffer.empty(1 << 50)
    assert "out of GPU memory" in str(error.value)


def test_launch_rejects_a_grid_of_partial_clusters(kernel, stream):
    bad = replace(shape(2), grid=(ELEMENTS // THREADS - 1, 1, 1))
    with pytest.raises(driver.DeviceError, match="is not whole clusters of"):
        driver.launch(kernel, bad, [0, 0, 0], stream)


def add_chain_plan(artifact, cluster: int, path: Path) -> Path:
    """A plan of two dependent launches of the test kernel (mid = a + b, out = mid + b with a and
    b read at offsets of one concatenated weight buffer) and its interpreter program."""
    from lanec.interp.program import Program, Step, Weight
    from lanec.runtime.plan import Arg, Buffer, Launch, Plan, Shape, Source, Transform, WeightBinding

    program = Program(batch=1, tokens=1, inputs=[], states=[],
                      weights=[Weight(0, "a", "f32", [ELEMENTS], "f32"), Weight(1, "b", "f32", [ELEMENTS], "f32")],
                      steps=[Step("add", {"a": 0, "b": 1}, [2]), Step("add", {"a": 2, "b": 1}, [3])],
                      outputs=[2, 3])
    plan = Plan(program=program.to_json(), form="")
    kernel = plan.add_cubin(artifact.cubin)
    plan.buffers = [Buffer("ab", (2 * ELEMENTS,), "float32", "weight"),
                    Buffer("mid", (ELEMENTS,), "float32", "output", 0),
                    Buffer("out", (ELEMENTS,), "float32", "output", 1)]
    plan.weights = [WeightBinding("ab", (Source("a", (ELEMENTS,), "float32", 1.0),
                                         Source("b", (ELEMENTS,), "float32", 1.0)), (Transform("concatenate"),))]
    launch_shape = Shape.of(shape(cluster, pdl=True))
    entry = artifact.facts["entry"]
    plan.launches = [Launch("add 0", kernel, entry, launch_shape, (Arg("ab"), Arg("ab", ELEMENTS), Arg("mid"))),
                     Launch("add 1", kernel, entry, launch_shape, (Arg("mid"), Arg("ab", ELEMENTS), Arg("out")))]
    plan.write(path)
    return path


@pytest.mark.parametrize("graph, pdl", [(True, True), (False, False)])
def test_runner_check_agrees(gpu_artifact, tmp_path, graph, pdl):
    from lanec.runtime.runner import Options, execute

    path = add_chain_plan(gpu_artifact(NAME), 1, tmp_path / "plan.bin")
    lines = []
    assert execute(path, Options(check=True, graph=graph, pdl=pdl, seed=11), say=lines.append) == 0, lines
    assert lines[-1] == "check: 2 of 2 agree with the interpreter"


def test_runner_check_finds_a_wrong_kernel(gpu_artifact, tmp_path):
    from lanec.runtime.runner import Options, execute

    # with a cluster of 2 every second block adds 2 b: not what the program means
    path = add_chain_plan(gpu_artifact(NAME), 2, tmp_path / "plan.bin")
    lines = []
    assert execute(path, Options(check=True), say=lines.append) == 1
    assert "mismatch in mid, out" in lines[-1]


def test_runner_times_steps(gpu_artifact, tmp_path):
    from lanec.runtime.runner import Options, execute

    path = add_chain_plan(gpu_artifact(NAME), 2, tmp_path / "plan.bin")
    lines = []
    assert execute(path, Options(steps=5, repeats=5), say=lines.append) == 0
    print("\n".join(lines))
    assert lines[-1].startswith("5 steps run; step ") and any(line.startswith("add 1") for line in lines)


if __name__ == "__main__":
    if sys.argv[1:] != ["--build"]:
        sys.exit("usage: python tests/gpu/test_driver.py --build   (CPU machine, CuTe DSL installed)")
    print(build(Path(__file__).resolve().parents[2] / "build" / "gpu"))
