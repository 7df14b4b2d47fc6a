"""Decode attention: `attention` (GQA over a paged cache) and `latent_attention` (absorbed MLA over
the latent cache), each with `attention_combine` where split, against SGLang's Triton decode
kernels, torch's SDPA and the roofline, measured in the same run. Two steps:

    python bench/attention.py build          # CPU machine: compile into build/bench-attention/
    python .anchors/make_vendor.py           # once: SGLang's kernels into .anchors/vendor (not committed)
    PYTHONPATH=. python3 bench/attention.py  # GPU machine (carry build/bench-attention, .anchors)

Shapes (page size 16; every request at the full context: positions = context - q .. context -
1, the step's rows written into the cache and the others read from it):
- GQA 32/8 x 128 (Llama-3-8B-like) and 8/2 x 128 (its TP shard): context 4096 and 32768, batch
  1, 8, 64, q = 1; and q = 4 (speculative verify) at 32768, batch 8.
- MLA (absorbed; the attention over the latent rows, the absorption and expansion products
  apart): Kimi Linear (32 heads, NoPE: row 512), DeepSeek-V3 (128 heads, row 512 + 64) and its
  16-head shard; context 4096 and 32768, batch 1, 8, 64; and q = 4 at 32768, batch 8.
Each shape runs with the split count `attention_splits` picks and, where they differ, fixed
splits 1 and 16 (LANEC_ATTN_SPLITS=4,32,64 adds more; LANEC_ATTN_SWEEP=1 measures every split at
batch 1, 3 and 8, with GQA 16/2 x 256 too; LANEC_ATTN_SCHEDULE='{"stages": 4}' builds every GQA kernel
with a schedule of its own;
LANEC_ATTN_BULK=1 also builds each shape's chosen split with the bulk-copy load engine, `loads`
"bulk", and times it beside the default cp.async engine: set it for both steps). LANEC_ATTN_CLUSTER=1
also builds each shape at its chosen split clamped to 2..8 with the chunks merged in the
attention's own cluster over DSMEM (`combine` "cluster"), timed beside the same split's attention +
attention_combine launches. The MLA rows run the latent attention's default engine (LATENT_ENGINE:
wgmma, latent_wgmma.py); LANEC_ATTN_MMA=1 also builds each MLA shape's chosen split on the mma.sync
engine (`engine` "mma"), timed beside it (set it for both steps); LANEC_ATTN_PARTIALS=1 also builds each split
MLA shape's chosen split with its chunks' rows in bf16 (`partials` "bfloat16", LATENT_PARTIALS) and a combine
reading them, timed beside the fp32 pair (set it for both steps); LANEC_ATTN_KINDS=mla (or gqa) keeps
only that kind's shapes; LANEC_ATTN_CONTEXTS=1024,4096 measures those contexts in place of 4k and 32k,
LANEC_ATTN_BATCHES=1,8 those batches (and no verify rows), LANEC_ATTN_PAGE=64 another page size;
LANEC_ATTN_MLA=kimi-linear-576 keeps only the named MLA shapes (kimi-linear-576: the imported plans' 512 + 64
row); LANEC_ATTN_ROWS=8,16 also builds each MLA split of 4 and more in blocks of at most that many query rows
(`block_rows`), timed beside it.

Method: clocks warmed by a few seconds of matmuls, then torch's 1 GiB copy_ (read + write
counted) and the bf16 tensor peak (an 8192^3 matmul). Each shape's cache rotates over enough
copies to pass 256 MB (4x the L2), so no launch finds its keys in L2; a CUDA graph holds one
step per copy (ours: the attention launch and, where split, the combine, both with PDL), and a
step's time is the median graph replay / the copies. "% copy": the cache bytes read per second
against the copy bandwidth. MLA's roofline: max(latent bytes / copy bandwidth, FLOPs / tensor
peak), FLOPs = 2 x rows x heads x context x (row + lora). Anchors: torch's
scaled_dot_product_attention (GQA; bf16, contiguous [batch, kv heads, context, 128], q rows)
under a CUDA graph over the same memory, and SGLang 0.5.23's Triton `decode_attention_fwd`
(GQA, and MLA with has_mla) called as its Triton backend calls it, timed by the anchors
probe's own rotation and graph (`.anchors/bench_anchors.py`); a missing .anchors leaves its
column empty. "x" columns: anchor time / ours (> 1: ours is faster)."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import measure  # bench/measure.py: this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / ("bench-attention" + ("-sweep" if os.environ.get("LANEC_ATTN_SWEEP") == "1" else "")
                        + "".join(f"-{k}{v}" for k, v in sorted(json.loads(os.environ.get("LANEC_ATTN_SCHEDULE")
                                                                            or "{}").items()))
                        + ("-bulk" if os.environ.get("LANEC_ATTN_BULK") == "1" else "")
                        + ("-cluster" if os.environ.get("LANEC_ATTN_CLUSTER") == "1" else "")
                        + ("-mma" if os.environ.get("LANEC_ATTN_MMA") == "1" else "")
                        + ("-partials" if os.environ.get("LANEC_ATTN_PARTIALS") == "1" else "")
                        + (f"-rows{os.environ['LANEC_ATTN_ROWS'].replace(',', '-')}"
                           if os.environ.get("LANEC_ATTN_ROWS") else "")
                        + (f"-{os.environ['LANEC_ATTN_MLA'].replace(',', '-').replace(' ', '_')}"
                           if os.environ.get("LANEC_ATTN_MLA") else "")
                        + (f"-p{os.environ['LANEC_ATTN_PAGE']}" if os.environ.get("LANEC_ATTN_PAGE") else "")
                        + (f"-b{os.environ['LANEC_ATTN_BATCHES'].replace(',', '-')}"
                           if os.environ.get("LANEC_ATTN_BATCHES") else "")
                        + (f"-{os.environ['LANEC_ATTN_KINDS']}" if os.environ.get("LANEC_ATTN_KINDS") else "")
                        + (f"-c{os.environ['LANEC_ATTN_CONTEXTS'].replace(',', '-')}"
                           if os.environ.get("LANEC_ATTN_CONTEXTS") else ""))

# LANEC_ATTN_PAGE=64: another page size (the imported plans' is 64)
PAGE = int(os.environ.get("LANEC_ATTN_PAGE") or 16)
HEAD = 128
GQA = [(32, 8, HEAD), (8, 2, HEAD)]  # (query heads, KV heads, head size)
# the sweep also measures the GQA shapes of the test plans the split rule reaches: Qwen3-Next's 16/2 x 256
# (qwen-next-b1) and, at batch 3, Llama-3-8B's 32/8 x 128 (llama-3.1-8b-b3)
SWEEP_GQA = [(16, 2, 256)]
SWEEP_BATCHES = (1, 3, 8)
# (label, heads, lora, rope): the latent row is lora + rope wide
MLA = [("kimi-linear", 32, 512, 0), ("deepseek-v3", 128, 512, 64), ("deepseek-v3 tp8", 16, 512, 64)]
# the row of the imported Kimi Linear plans (its config's qk_rope_head_dim, 64, in the cache row): timed only where
# LANEC_ATTN_MLA names it
MLA_NAMED = [("kimi-linear-576", 32, 512, 64)]
# LANEC_ATTN_MLA=kimi-linear-576,deepseek-v3: only these MLA shapes
MLA_ONLY = [label for label in (os.environ.get("LANEC_ATTN_MLA") or "").split(",") if label]
if MLA_ONLY:
    MLA = [shape for shape in MLA + MLA_NAMED if shape[0] in MLA_ONLY]
# LANEC_ATTN_CONTEXTS=1024,4096: these contexts in place of 4k and 32k (into a folder of their own)
CONTEXTS = [int(c) for c in (os.environ.get("LANEC_ATTN_CONTEXTS") or "4096,32768").split(",")]
# LANEC_ATTN_BATCHES=1,8: only these batches, and no speculative-verify rows
BATCHES = [int(b) for b in (os.environ.get("LANEC_ATTN_BATCHES") or "1,8,64").split(",")]
VERIFY = (32768, 8, 4)  # (context, batch, q): the speculative-verify rows
VERIFIES = [] if os.environ.get("LANEC_ATTN_BATCHES") else [VERIFY]
FIXED_SPLITS = sorted({1, 16, *(int(n) for n in os.environ.get("LANEC_ATTN_SPLITS", "").split(",") if n)})
# LANEC_ATTN_SWEEP=1: the split sweep `attention_splits` is fitted to: one query row, batch 1, 3 and 8,
# splits 1 to 128, ours only (no anchors)
SWEEP = os.environ.get("LANEC_ATTN_SWEEP") == "1"
# LANEC_ATTN_SCHEDULE='{"stages": 4}' (JSON, AttentionSchedule's fields): every GQA kernel of the run
# built with it (the latent kernels keep their defaults: their buffers fill the shared memory), into
# a folder of its own (build/bench-attention[-sweep]-<fields>), to compare schedules
SCHEDULE = json.loads(os.environ.get("LANEC_ATTN_SCHEDULE") or "{}")
# LANEC_ATTN_BULK=1: each shape's chosen split also with loads "bulk" (stem + "_bulk"), timed beside it
BULK = os.environ.get("LANEC_ATTN_BULK") == "1"
# LANEC_ATTN_CLUSTER=1: each shape also with its chunks merged in the attention's own cluster
# (`combine` "cluster", stem + "_cluster") at its chosen split clamped to 2..8 (a cluster's CTAs),
# timed beside the same split's two launches (attention + attention_combine)
CLUSTER = os.environ.get("LANEC_ATTN_CLUSTER") == "1"
# LANEC_ATTN_MMA=1: each MLA shape's chosen split also on the mma.sync engine (stem + "_mma"), timed beside it
MMA = os.environ.get("LANEC_ATTN_MMA") == "1"
# LANEC_ATTN_PARTIALS=1: each split MLA shape's chosen split also with bf16 partial rows (stem + "_bf16"), and its
# combine reading them (the combine's stem + "_bf16"), timed beside the fp32 pair
PARTIALS = os.environ.get("LANEC_ATTN_PARTIALS") == "1"
# LANEC_ATTN_ROWS=8,16: each MLA shape's splits also with blocks of at most that many query rows (the wgmma engine's
# `block_rows`: more CTAs, each with fewer rows, reading the same chunks; stem + "_r8"), timed beside them
BLOCK_ROWS = [int(n) for n in (os.environ.get("LANEC_ATTN_ROWS") or "").split(",") if n]
# LANEC_ATTN_KINDS=mla or gqa: only that kind's shapes (a shorter run)
KINDS = os.environ.get("LANEC_ATTN_KINDS") or "gqa,mla"
CLUSTER_SPLITS = 8  # lanec.codegen.facts.ATTENTION_CLUSTER_SPLITS (not imported: the GPU side has no CuTe DSL)
SWEEP_SPLITS = (1, 4, 8, 16, 32, 64, 128)
ROTATE_BYTES = 256 * 2**20
REPEATS = 15


def problems() -> list[dict]:
    """Every benchmark shape with the split counts it is built at."""
    from lanec.shim import attention_splits

    found = []
    shapes = [dict(kind="gqa", label=f"GQA {h}/{kv} x {d}", heads=h, kv=kv, width=d, lora=d, rope=0)
              for h, kv, d in GQA + (SWEEP_GQA if SWEEP else [])]
    shapes += [dict(kind="mla", label=f"MLA {label}", heads=h, kv=1, width=lora + rope, lora=lora, rope=rope)
               for label, h, lora, rope in MLA]
    for shape in (shape for shape in shapes if shape["kind"] in KINDS.split(",")):
        grid = [(c, b, 1) for c in CONTEXTS for b in BATCHES] + VERIFIES
        if SWEEP:
            grid = [(c, b, 1) for c in CONTEXTS for b in SWEEP_BATCHES]
        for context, batch, q in grid:
            chosen = attention_splits(batch, shape["heads"], shape["kv"], context, latent=shape["kind"] == "mla")
            fixed = SWEEP_SPLITS if SWEEP else FIXED_SPLITS
            found.append(dict(shape, context=context, batch=batch, q=q, chosen=chosen,
                              splits=sorted({chosen, *fixed})))
    return found


def cache_bytes(p: dict) -> int:
    """Bytes of cache a step reads: K and V of every KV head (GQA), or the latent rows (MLA)."""
    if p["kind"] == "gqa":
        return 2 * p["batch"] * p["context"] * p["kv"] * p["width"] * 2
    return p["batch"] * p["context"] * p["width"] * 2


def stem(p: dict, splits: int, kernel: str = "attn") -> str:
    kind = p["kind"] + (f"r{p['rope']}" if p["kind"] == "mla" else "")
    return f"{kernel}_{kind}_h{p['heads']}kv{p['kv']}_c{p['context']}_b{p['batch']}_q{p['q']}_s{splits}"


def kernel_spec(p: dict, splits: int, extra: dict | None = None) -> dict:
    """The kernel's spec for problem `p` at `splits` chunks, `extra` schedule knobs added (a
    variant's: loads "bulk", combine "cluster")."""
    pages = p["context"] // PAGE
    common = dict(batch=p["batch"], tokens=p["q"], heads=p["heads"], page_size=PAGE, max_pages=pages,
                  cache_pages=p["batch"] * pages, splits=splits)
    extra = extra or {}
    if p["kind"] == "gqa":
        schedule = dict(SCHEDULE, **extra)
        return dict(common, kv_heads=p["kv"], head=p["width"], **({"schedule": schedule} if schedule else {}))
    return dict(common, lora=p["lora"], rope=p["rope"], nope=128, **({"schedule": extra} if extra else {}))


def variants(p: dict) -> list[tuple[str, int, str, dict]]:
    """The builds timed beside the splits of problem `p`: (key, splits, stem, schedule knobs)."""
    found = []
    if BULK:
        found.append(("bulk", p["chosen"], stem(p, p["chosen"]) + "_bulk", {"loads": "bulk"}))
    if CLUSTER:
        splits = min(max(p["chosen"], 2), CLUSTER_SPLITS)
        found.append(("cluster", splits, stem(p, splits) + "_cluster", {"combine": "cluster"}))
    if MMA and p["kind"] == "mla":
        found.append(("mma", p["chosen"], stem(p, p["chosen"]) + "_mma", {"engine": "mma"}))
    if PARTIALS and p["kind"] == "mla" and p["chosen"] > 1:
        found.append(("bf16", p["chosen"], stem(p, p["chosen"]) + "_bf16", {"partials": "bfloat16"}))
    if p["kind"] == "mla":
        bf16 = {"partials": "bfloat16"} if PARTIALS else {}  # with LANEC_ATTN_PARTIALS, as the plans store them
        found += [(f"r{rows}s{splits}" + "_bf16" * PARTIALS, splits, stem(p, splits) + f"_r{rows}" + "_bf16" * PARTIALS,
                   {"block_rows": rows, **bf16})
                  for rows in BLOCK_ROWS for splits in p["splits"] if rows < p["heads"] * p["q"] and splits >= 4]
    return found


def bf16_partials(key) -> bool:
    """Whether a timing's build (its key: a split count, or a variant's name) stores its chunks' rows in bf16
    for a combine reading them ("bf16", and the block-rows variants under LANEC_ATTN_PARTIALS)."""
    return str(key).endswith("bf16")


def _build_one(job: tuple) -> str:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.attention import Attention, AttentionCombine, LatentAttention

    kind, spec, name = job
    kernel = {"gqa": Attention, "mla": LatentAttention, "combine": AttentionCombine}[kind](**spec)
    compile_kernel(kernel).save(OUT, name)
    return name


def build() -> None:
    from concurrent.futures import ProcessPoolExecutor

    sys.path.insert(0, str(ROOT))
    jobs, listing = [], problems()
    for p in listing:
        jobs += [(p["kind"], kernel_spec(p, splits, extra), name) for _, splits, name, extra in variants(p)]
        jobs += [("combine", dict(rows=p["batch"] * p["q"], heads=p["heads"], head=p["lora"], splits=splits,
                                  partials="bfloat16"), stem(p, splits, "combine") + "_bf16")
                 for splits in sorted({splits for key, splits, _, _ in variants(p) if bf16_partials(key)})]
        for splits in sorted({*p["splits"], *(v[1] for v in variants(p) if v[0] == "cluster")}):
            jobs.append((p["kind"], kernel_spec(p, splits), stem(p, splits)))
            if splits > 1:
                jobs.append(("combine", dict(rows=p["batch"] * p["q"], heads=p["heads"], head=p["lora"],
                                             splits=splits), stem(p, splits, "combine")))
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

    device = driver.Device(0)
    torch.cuda.init()
    anchors = None if SWEEP else measure.load_anchors("decode_attention.py")
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    listing = json.loads((OUT / "manifest.json").read_text())
    torch_stream = torch.cuda.Stream()
    ours_stream = driver.Stream()
    kernels = measure.Kernels(driver, OUT, ours_stream)

    def events_us(fn, repeats=REPEATS) -> float:
        return measure.events_us(torch, torch_stream, fn, repeats)

    copy_bw, peak = measure.ceilings(torch, torch_stream, device.name)

    def time_ours(p: dict, copies: int, step: dict, stores: dict) -> dict:
        """Our kernel (and its combine) a copy each of the `stores` (name -> [copies, ...]) in one
        graph, the `step`'s other tensors shared: {splits: us a step}, {"bulk": us} for the chosen
        split's bulk-copy build (LANEC_ATTN_BULK=1), {"cluster": us} for the cluster-combined build
        (LANEC_ATTN_CLUSTER=1) and {"launched": us} for the same split's two launches."""
        timings = {}
        rows = p["batch"] * p["q"]
        builds = [(splits, splits, stem(p, splits)) for splits in p["splits"]]
        builds += [(key, splits, name) for key, splits, name, _ in variants(p)]
        clustered = next((splits for key, splits, _, _ in variants(p) if key == "cluster"), None)
        if clustered is not None and clustered not in p["splits"]:
            builds.append(("launched", clustered, stem(p, clustered)))
        for key, splits, built in builds:
            partial = torch.empty(splits, rows, p["heads"], p["lora"], device="cuda",
                                  dtype=torch.bfloat16 if bf16_partials(key) else torch.float32)
            lse = torch.empty(splits, rows, p["heads"], dtype=torch.float32, device="cuda")
            launches = []
            for c in range(copies):
                tensors = dict(step, partial=partial, lse=lse, **{name: x[c] for name, x in stores.items()})
                launches.append(kernels.launch(built, tensors))
                if splits > 1 and key != "cluster":
                    launches.append(kernels.launch(stem(p, splits, "combine") + "_bf16" * bf16_partials(key), tensors))
            torch.cuda.synchronize()
            timings[key] = measure.graph_us(driver, ours_stream, launches, REPEATS) / copies
            del partial, lse
        return timings

    l2 = getattr(props, "L2_cache_size", 60 * 2**20) or 60 * 2**20
    rotate = max(4 * l2, 256 << 20)

    def anchor_us(make: str, nbytes: int, *args) -> float:
        """SGLang's kernel on the shape (the probe's `make` case with `args`, as many copies as
        its rotation wants), timed by the probe's own graph."""
        if anchors is None:
            return float("nan")
        try:
            case = getattr(anchors, make)(*args[:5], max(1, math.ceil(rotate / nbytes)), "cuda", sms, True,
                                          *args[5:])
            us, _ = anchors.bench([case.op(i % case.copies) for i in range(max(8, case.copies))])
            del case
            torch.cuda.empty_cache()
            return us
        except Exception as exc:  # an anchor failing costs its cell, not the table
            print(f"  SGLang failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
            return float("nan")

    rows = []
    bf = dict(dtype=torch.bfloat16, device="cuda")
    for p in listing:
        heads, kv, context, batch, q = p["heads"], p["kv"], p["context"], p["batch"], p["q"]
        nbytes = cache_bytes(p)
        copies = max(1, math.ceil(ROTATE_BYTES / nbytes))
        pages = context // PAGE
        n = batch * q
        positions = (torch.arange(n, device="cuda", dtype=torch.int32) % q + context - q).contiguous()
        table = torch.randperm(batch * pages, device="cuda").to(torch.int32).reshape(batch, pages)
        out = torch.empty(n, heads * p["lora"], **bf)
        sdpa_us = sgl_us = float("nan")
        if p["kind"] == "gqa":
            d = p["width"]
            k_store = torch.empty(copies, batch * context * kv * d, **bf).normal_()
            v_store = torch.empty(copies, batch * context * kv * d, **bf).normal_()
            step = {"q": torch.randn(n, heads * d, **bf), "k": torch.randn(n, kv * d, **bf),
                    "v": torch.randn(n, kv * d, **bf), "positions": positions, "pages": table, "out": out}
            timings = time_ours(p, copies, step, {"k_cache": k_store, "v_cache": v_store})
            q4 = step["q"].reshape(batch, q, heads, d).transpose(1, 2)
            ks = [k_store[c].view(batch, kv, context, d) for c in range(copies)]
            vs = [v_store[c].view(batch, kv, context, d) for c in range(copies)]
            try:
                if SWEEP:
                    raise RuntimeError("a split sweep: no anchors")
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
            except Exception as exc:
                if not SWEEP:
                    print(f"  SDPA failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
            del k_store, v_store, ks, vs
            torch.cuda.empty_cache()
            if q == 1 and anchors is not None:  # SGLang's decode kernel takes one query row a request
                sgl_us = anchor_us("make_gqa_case", nbytes, batch, context, heads, kv, d)
            flops = 4 * n * heads * context * d
        else:
            lora, rope = p["lora"], p["rope"]
            store = torch.empty(copies, batch * pages, PAGE, lora + rope, **bf).normal_()
            step = {"q": torch.randn(n, heads * lora, **bf), "qr": torch.randn(n, heads * (128 + rope), **bf),
                    "latent": torch.randn(n, lora, **bf), "k_rope": torch.randn(n, max(rope, 8), **bf),
                    "positions": positions, "pages": table, "out": out}
            timings = time_ours(p, copies, step, {"cache": store})
            del store
            torch.cuda.empty_cache()
            if q == 1 and anchors is not None:
                sgl_us = anchor_us("make_mla_case", nbytes, batch, context, heads, lora, rope,
                                   anchors.mla_max_kv_splits(sms))
            flops = 2 * n * heads * context * (lora + rope + lora)
        roofline_us = max(nbytes / copy_bw, flops / peak) * 1e6
        rows.append((p, nbytes, timings, sdpa_us, sgl_us, roofline_us))
        print(f"  {p['label']} ctx {context} b{batch} q{q} ({copies} copies): "
              + "  ".join(f"{'' if isinstance(s, str) else 's'}{s} {us:.1f} us" for s, us in timings.items())
              + f"  SDPA {sdpa_us:.1f}  SGLang {sgl_us:.1f}  roofline {roofline_us:.1f} us", flush=True)

    print()
    print(f"GPU: {device.name}; copy {copy_bw / 1e12:.2f} TB/s (read + write); bf16 peak {peak / 1e12:.0f} "
          f"TFLOP/s; page size {PAGE}")
    print("| shape | context | batch | q | cache MB | splits (chosen) | ours us | % of roofline | best fixed "
          "(1 or 16) us | SGLang us | SGLang / ours | SDPA us | SDPA / ours |"
          + (" bulk loads us | ours / bulk |" if BULK else "")
          + (" cluster splits | two launches us | cluster combine us | launches / cluster |" if CLUSTER else "")
          + (" mma.sync us | mma.sync / ours |" if MMA else "")
          + (" bf16 partials us | ours / bf16 partials |" if PARTIALS else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if BULK else "")
          + ("---|---|---|---|" if CLUSTER else "") + ("---|---|" if MMA else "") + ("---|---|" if PARTIALS else ""))
    for p, nbytes, timings, sdpa_us, sgl_us, roofline_us in rows:
        ours = timings[p["chosen"]]
        fixed = min(timings[1], timings[16])
        print(f"| {p['label']} | {p['context']} | {p['batch']} | {p['q']} | {nbytes / 1e6:.0f} | {p['chosen']} "
              f"| {ours:.1f} | {100 * roofline_us / ours:.0f}% | {fixed:.1f} | {sgl_us:.1f} | {sgl_us / ours:.2f} "
              f"| {sdpa_us:.1f} | {sdpa_us / ours:.2f} |"
              + (f" {timings['bulk']:.1f} | {ours / timings['bulk']:.2f} |" if BULK else "")
              + (cluster_cells(p, timings) if CLUSTER else "")
              + (mma_cells(timings, ours) if MMA else "")
              + ((f" {timings['bf16']:.1f} | {ours / timings['bf16']:.2f} |" if "bf16" in timings else " | |")
                 if PARTIALS else ""))


def mma_cells(timings: dict, ours: float) -> str:
    """The mma.sync columns of an MLA row: its time and its time over ours (> 1: the default engine is
    faster); empty for a GQA row."""
    if "mma" not in timings:
        return " | |"
    return f" {timings['mma']:.1f} | {timings['mma'] / ours:.2f} |"


def cluster_cells(p: dict, timings: dict) -> str:
    """The cluster columns of problem `p`'s row: its split, the same split's two launches, the
    cluster combine, and their ratio (> 1: the cluster combine is faster)."""
    splits = min(max(p["chosen"], 2), CLUSTER_SPLITS)
    launched = timings.get(splits, timings.get("launched", float("nan")))
    return f" {splits} | {launched:.1f} | {timings['cluster']:.1f} | {launched / timings['cluster']:.2f} |"


if __name__ == "__main__":
    measure.main(build, run, "attention.py")
