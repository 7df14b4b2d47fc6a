"""What the benchmarks share on the GPU machine: CUDA-event timing on a torch stream, the
ceilings every table is a share of (the clocks warmed by a few seconds of matmuls, then the bf16
tensor peak of an 8192^3 matmul and the device-to-device copy bandwidth of 1 GiB, read + write
counted), and the SGLang anchors probe (`.anchors/`, built by `.anchors/make_vendor.py`, never
committed). Imported by the bench scripts as `measure` (their own directory is on sys.path)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ANCHORS = Path(__file__).resolve().parents[1] / ".anchors"


def events_us(torch, stream, fn, repeats: int = 15) -> float:
    """Median microseconds of `fn` on `stream`, between two CUDA events, over `repeats` runs."""
    times = []
    with torch.cuda.stream(stream):
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
    return sorted(times)[len(times) // 2]


def ceilings(torch, stream, name: str) -> tuple[float, float]:
    """(copy bandwidth in bytes/s, bf16 tensor peak in FLOP/s), measured now, printed once."""
    held = {"a": torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")}
    warm_until = time.perf_counter() + 3.0  # the card idles at 345 MHz
    while time.perf_counter() < warm_until:
        for _ in range(20):
            held["a"] @ held["a"]
        torch.cuda.synchronize()
    peak = 2 * 8192**3 / (events_us(torch, stream, lambda: held["a"] @ held["a"], repeats=20) * 1e-6)
    held = {"src": torch.empty(2**30, dtype=torch.uint8, device="cuda").random_(0, 255)}
    held["dst"] = torch.empty_like(held["src"])
    copy_us = events_us(torch, stream, lambda: held["dst"].copy_(held["src"]), repeats=20)
    held.clear()
    torch.cuda.empty_cache()
    copy_bw = 2 * 2**30 / (copy_us * 1e-6)
    print(f"{name}: copy {copy_bw / 1e12:.2f} TB/s (1 GiB, read + write), bf16 tensor peak {peak / 1e12:.0f} "
          "TFLOP/s", flush=True)
    return copy_bw, peak


def load_anchors(needs: str):
    """The anchors probe (SGLang's Triton kernels, called as SGLang serves them, and its timing),
    or None where `.anchors/vendor/<needs>` is absent (the anchor's column stays empty)."""
    if not (ANCHORS / "vendor" / needs).is_file():
        print("SGLang anchors: .anchors/vendor missing (python .anchors/make_vendor.py): column left empty")
        return None
    sys.path[:0] = [str(ANCHORS / "vendor"), str(ANCHORS)]
    import bench_anchors

    return bench_anchors


def graph_us(driver, stream, launches, repeats: int = 15) -> float:
    """Median microseconds of one replay of a CUDA graph holding `launches` (driver.Launch, enqueued
    once eagerly first, then captured on `stream`)."""
    for launch in launches:
        launch.enqueue()
    stream.synchronize()
    graph = driver.Graph.capture(stream, lambda: [launch.enqueue() for launch in launches])
    for _ in range(3):
        graph.replay(stream)
    us = driver.time_us(stream, lambda: graph.replay(stream), repeats=repeats)
    graph.destroy()
    return us


def torch_graph_us(torch, stream, fn, repeats: int = 15) -> float:
    """Median microseconds of one replay of a torch CUDA graph of `fn` (run once eagerly first)."""
    with torch.cuda.stream(stream):
        fn()
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            fn()
        for _ in range(3):
            graph.replay()
    us = events_us(torch, stream, graph.replay, repeats)
    del graph
    return us


class Kernels:
    """A bench folder's compiled kernels (`stem`.cubin + .json), each loaded once, and launches of
    them on `stream` with tensors bound by their params' names."""

    def __init__(self, driver, folder: Path, stream):
        from lanec.runtime.artifact import load_artifact

        self.driver, self.folder, self.stream, self.load = driver, folder, stream, load_artifact
        self.loaded: dict = {}

    def launch(self, stem: str, tensors: dict):
        if stem not in self.loaded:
            art = self.load(self.folder, stem)
            self.loaded[stem] = art, self.driver.Module(art.cubin).function(art.entry, art.launch)
        art, function = self.loaded[stem]
        return self.driver.Launch(function, art.launch, [tensors[p.name].data_ptr() for p in art.params], self.stream)


def warm_kernels(driver, folder: Path, rounds: int = 100):
    """(the device, a stream, `folder`'s Kernels on it) after `rounds` passes over 256 MB warm the
    clocks (the card idles low): what a bench of our own launches starts with."""
    import torch

    device = driver.Device(0)
    torch.cuda.init()
    stream = driver.Stream()
    held = torch.empty(2**28, dtype=torch.uint8, device="cuda")
    for _ in range(rounds):
        held.add_(1)
    torch.cuda.synchronize()
    del held
    return device, stream, Kernels(driver, folder, stream)


def main(build, run, script: str, write_table=None) -> None:
    """A bench script's command line: `build` (the CPU machine) or nothing (the GPU machine); with
    `write_table(path, results)`, also `--write-table PATH` (run, then write run()'s results there)."""
    if sys.argv[1:] == ["build"]:
        build()
    elif not sys.argv[1:]:
        run()
    elif write_table is not None and len(sys.argv) == 3 and sys.argv[1] == "--write-table":
        write_table(Path(sys.argv[2]), run())
    else:
        sys.exit(f"usage: python bench/{script} [build{' | --write-table PATH' if write_table else ''}]")
