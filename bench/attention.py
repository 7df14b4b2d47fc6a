"""GQA decode attention (`attention` + `attention_combine`) against torch's SDPA and the
device-to-device copy bandwidth, measured in the same run. Two steps:

    python bench/attention.py build          # CPU machine: compile into build/bench-attention/
    PYTHONPATH=. python3 bench/attention.py  # GPU machine (carry build/bench-attention): the table

Shapes: GQA 32/8 x 128 (Llama-3-8B-like) and 8/2 x 128 (its TP shard), page size 16, context
4096 and 32768 (every request at the full context: positions = context - 1, the step's k / v row
written into the cache and the others read from it), batch 1, 8 and 64, q = 1. Each shape is
built with the split count `attention_splits` picks and, where they differ, fixed splits 1 and 16.

Method: clocks warmed by a few seconds of matmuls, then torch's 1 GiB copy_ (eager, events; read
+ write counted). Each shape's cache rotates over enough copies to pass 256 MB (4x the L2), so no
launch finds its keys in L2; a CUDA graph holds one step per copy (ours: the attention launch, and
the combine launch when split, both with PDL) and a step's time is the median graph replay / the
copies. "% copy" is the cache bytes read (K + V, batch x context x kv heads x 128 x 2 bytes each)
per second against the copy bandwidth. The anchor is torch's scaled_dot_product_attention
(enable_gqa=True, bf16, contiguous [batch, kv heads, context, 128] K and V, one query row) under a
CUDA graph over the same memory; "SDPA / ours" > 1: ours is faster."""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench-attention"

SHAPES = [(32, 8), (8, 2)]  # (query heads, KV heads), head 128
HEAD = 128
PAGE = 16
CONTEXTS = [4096, 32768]
BATCHES = [1, 8, 64]
# fixed splits beside the chosen one (1 and 16 always; LANEC_ATTN_SPLITS=4,32,64 adds a sweep)
FIXED_SPLITS = sorted({1, 16, *(int(n) for n in os.environ.get("LANEC_ATTN_SPLITS", "").split(",") if n)})
MAX_CACHE = 40e9
ROTATE_BYTES = 256 * 2**20
REPEATS = 15


def cache_bytes(heads_kv: int, context: int, batch: int) -> int:
    return 2 * batch * context * heads_kv * HEAD * 2  # K and V, bf16


def problems() -> list[dict]:
    from lanec.shim import attention_splits

    found = []
    for heads, kv in SHAPES:
        for context in CONTEXTS:
            for batch in BATCHES:
                if cache_bytes(kv, context, batch) > MAX_CACHE:
                    continue
                chosen = attention_splits(batch, heads, kv, context)
                found.append(dict(heads=heads, kv=kv, context=context, batch=batch, chosen=chosen,
                                  splits=sorted({chosen, *FIXED_SPLITS})))
    return found


def stem(problem: dict, splits: int, kernel: str = "attn") -> str:
    return f"{kernel}_h{problem['heads']}kv{problem['kv']}_c{problem['context']}_b{problem['batch']}_s{splits}"


def _build_one(job: tuple) -> str:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.attention import Attention, AttentionCombine

    kind, spec, name = job
    kernel = Attention(**spec) if kind == "attn" else AttentionCombine(**spec)
    compile_kernel(kernel).save(OUT, name)
    return name


def build() -> None:
    from concurrent.futures import ProcessPoolExecutor

    sys.path.insert(0, str(ROOT))
    jobs, listing = [], problems()
    for p in listing:
        pages = p["context"] // PAGE
        for splits in p["splits"]:
            jobs.append(("attn", dict(batch=p["batch"], tokens=1, heads=p["heads"], kv_heads=p["kv"], head=HEAD,
                                      page_size=PAGE, max_pages=pages, cache_pages=p["batch"] * pages,
                                      splits=splits), stem(p, splits)))
            if splits > 1:
                jobs.append(("combine", dict(rows=p["batch"], heads=p["heads"], head=HEAD, splits=splits),
                             stem(p, splits, "combine")))
    start = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        for name in pool.map(_build_one, jobs):
            print(f"built {name}  ({time.perf_counter() - start:.0f} s)", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "manifest.json").write_text(json.dumps(listing, indent=1) + "\n")
    print(f"{len(jobs)} kernels for {len(listing)} problems in {OUT.relative_to(ROOT)}")


def run() -> None:
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(ROOT))
    from lanec.runtime import driver
    from lanec.runtime.artifact import load_artifact

    device = driver.Device(0)
    torch.cuda.init()
    listing = json.loads((OUT / "manifest.json").read_text())
    torch_stream = torch.cuda.Stream()
    ours_stream = driver.Stream()

    def events_us(fn, repeats=REPEATS) -> float:
        times = []
        with torch.cuda.stream(torch_stream):
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1000.0)
        return statistics.median(times)

    # warm the clocks (the card idles at 345 MHz) with a few seconds of matmuls, then the copy ceiling
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    warm_until = time.perf_counter() + 3.0
    while time.perf_counter() < warm_until:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()
    del a
    held = {"src": torch.empty(2**30, dtype=torch.uint8, device="cuda").random_(0, 255)}
    held["dst"] = torch.empty_like(held["src"])
    with torch.cuda.stream(torch_stream):
        for _ in range(5):
            held["dst"].copy_(held["src"])
    copy_us = events_us(lambda: held["dst"].copy_(held["src"]), repeats=20)
    copy_bw = 2 * 2**30 / (copy_us * 1e-6)
    held.clear()
    torch.cuda.empty_cache()
    print(f"{device.name}: device-to-device copy {copy_bw / 1e12:.2f} TB/s (1 GiB, read + write)", flush=True)

    rows = []
    for p in listing:
        heads, kv, context, batch = p["heads"], p["kv"], p["context"], p["batch"]
        nbytes = cache_bytes(kv, context, batch)
        copies = max(1, math.ceil(ROTATE_BYTES / nbytes))
        pages = context // PAGE
        bf = dict(dtype=torch.bfloat16, device="cuda")
        # one K and one V store per copy; ours reads them as pages, SDPA as [batch, kv, context, 128]
        k_store = torch.empty(copies, batch * context * kv * HEAD, **bf).normal_()
        v_store = torch.empty(copies, batch * context * kv * HEAD, **bf).normal_()
        q = torch.randn(batch, heads * HEAD, **bf)
        k_new, v_new = torch.randn(batch, kv * HEAD, **bf), torch.randn(batch, kv * HEAD, **bf)
        positions = torch.full((batch,), context - 1, dtype=torch.int32, device="cuda")
        table = torch.randperm(batch * pages, device="cuda").to(torch.int32).reshape(batch, pages)
        out = torch.empty(batch, heads * HEAD, **bf)
        timings = {}
        for splits in p["splits"]:
            partial = torch.empty(splits, batch, heads, HEAD, dtype=torch.float32, device="cuda")
            lse = torch.empty(splits, batch, heads, dtype=torch.float32, device="cuda")
            art = load_artifact(OUT, stem(p, splits))
            attn = driver.Module(art.cubin).function(art.entry, art.launch)
            launches = []
            for c in range(copies):
                tensors = {"q": q, "k": k_new, "v": v_new, "positions": positions, "pages": table,
                           "k_cache": k_store[c], "v_cache": v_store[c], "out": out, "partial": partial, "lse": lse}
                launches.append(driver.Launch(attn, art.launch, [tensors[x.name].data_ptr() for x in art.params],
                                              ours_stream))
                if splits > 1:
                    comb = load_artifact(OUT, stem(p, splits, "combine"))
                    combine = driver.Module(comb.cubin).function(comb.entry, comb.launch)
                    ctensors = {"partial": partial, "lse": lse, "out": out}
                    launches.append(driver.Launch(combine, comb.launch,
                                                  [ctensors[x.name].data_ptr() for x in comb.params], ours_stream))
            torch.cuda.synchronize()
            for launch in launches:
                launch.enqueue()
            ours_stream.synchronize()
            graph = driver.Graph.capture(ours_stream, lambda launches=launches: [x.enqueue() for x in launches])
            for _ in range(3):
                graph.replay(ours_stream)
            timings[splits] = driver.time_us(ours_stream, lambda graph=graph: graph.replay(ours_stream),
                                             repeats=REPEATS) / copies
            graph.destroy()
            del partial, lse
        # the anchor: SDPA over the same stores as contiguous caches
        q4 = q.reshape(batch, heads, 1, HEAD)
        ks = [k_store[c].view(batch, kv, context, HEAD) for c in range(copies)]
        vs = [v_store[c].view(batch, kv, context, HEAD) for c in range(copies)]
        sdpa_us = float("nan")
        try:
            with torch.cuda.stream(torch_stream):
                for c in range(copies):
                    F.scaled_dot_product_attention(q4, ks[c], vs[c], enable_gqa=True)
                torch_stream.synchronize()
                torch_graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(torch_graph, stream=torch_stream):
                    for c in range(copies):
                        F.scaled_dot_product_attention(q4, ks[c], vs[c], enable_gqa=True)
            for _ in range(3):
                with torch.cuda.stream(torch_stream):
                    torch_graph.replay()
            sdpa_us = events_us(torch_graph.replay) / copies
            del torch_graph
        except Exception as exc:  # an anchor failing costs its cell, not the table
            print(f"  SDPA failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
        share = {s: 100 * nbytes / (us * 1e-6) / copy_bw for s, us in timings.items()}
        rows.append((p, nbytes, copies, timings, share, sdpa_us))
        print(f"  {heads}/{kv} ctx {context} b{batch} ({copies} copies): "
              + "  ".join(f"s{s} {us:.1f} us ({share[s]:.0f}%)" for s, us in timings.items())
              + f"  SDPA {sdpa_us:.1f} us", flush=True)
        del k_store, v_store, ks, vs
        torch.cuda.empty_cache()

    print()
    print(f"GPU: {device.name}; copy {copy_bw / 1e12:.2f} TB/s (read + write); page size {PAGE}; q = 1")
    print("| shape | context | batch | cache MB | splits (chosen) | ours us | % of copy | split 1 us | split 16 us "
          "| best split | SDPA us | SDPA % of copy | SDPA / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p, nbytes, _, timings, share, sdpa_us in rows:
        chosen = p["chosen"]
        ours = timings[chosen]
        best = min(timings, key=timings.get)
        sdpa_share = 100 * nbytes / (sdpa_us * 1e-6) / copy_bw
        print(f"| GQA {p['heads']}/{p['kv']} x 128 | {p['context']} | {p['batch']} | {nbytes / 1e6:.0f} | {chosen} "
              f"| {ours:.1f} | {share[chosen]:.0f}% | {timings[1]:.1f} | {timings[16]:.1f} | {best} "
              f"({timings[best]:.1f}) | {sdpa_us:.1f} | {sdpa_share:.0f}% | {sdpa_us / ours:.2f} |")


if __name__ == "__main__":
    if sys.argv[1:] == ["build"]:
        build()
    elif not sys.argv[1:]:
        run()
    else:
        sys.exit("usage: python bench/attention.py [build]")
