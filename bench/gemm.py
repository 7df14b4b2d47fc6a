"""gemm_tc (a batch's rows against a weight read once) against torch's matmul (cuBLAS) and against
the gemv launches it replaces (one per 32 rows, each reading the whole weight), at Kimi Linear's and
Llama-3-8B's product shapes and their dense MLPs' gated pairs (one launch, SwiGLU in its epilogue,
against cuBLAS's product then torch's SwiGLU), rows 16 to 256, with the copy bandwidth and the bf16
tensor peak measured in the same run. Two steps:

    python bench/gemm.py build           # CPU machine: compile into build/bench/gemm/
    PYTHONPATH=. python3 bench/gemm.py   # GPU machine (carry build/bench/gemm; torch for the anchor)
    PYTHONPATH=. python3 bench/gemm.py --write-table PATH   # and the fastest schedules, as schedules.json

Method: clocks warmed by a few seconds of matmuls, then torch's 1 GiB copy_ (eager, read + write
counted) and the bf16 tensor peak (an 8192^3 matmul). Each product's weights rotate over enough
copies to pass 256 MB (4x the L2), so every launch reads its weights from HBM; a CUDA graph holds
one step per copy (ours: one gemm_tc launch with PDL; gemv: its 32-row launches with PDL, as the
lowering ran them before gemm_tc; torch: matmul into the same output), and a step's time is the
median graph replay / the copies. "% copy": weight bytes a second over the copy bandwidth;
"% roof": the roofline max(weight bytes / copy bandwidth, 2 rows K N / tensor peak) over our
time. "x" columns: that anchor's time / ours (> 1: ours is faster). Ours is the default schedule
(the wgmma engine at the kernel's own splits and stages); beside it every power-of-two K split at
the default's stages and at 4 is timed, and the mma.sync engine at its default ("mma.sync", the
engine before wgmma); from 128 rows also row blocks (`block_rows` 64 and 128: more CTAs of fewer
rows, where one block of every row leaves SMs idle) at 3 and 4 stages; "best" is the fastest of
all, which --write-table records.

    LANEC_GEMM_ROWS=128,256 python bench/gemm.py build   # only those row counts
    LANEC_GEMM_BLOCKS=1 python bench/gemm.py build       # only the default and the row-block variants
    LANEC_GEMM_TMA=1 python bench/gemm.py build          # only the default, the table's, and both by TMA
                                                         # (one thread, and a producer warpgroup)
    LANEC_GEMM_STREAM=1 python bench/gemm.py build       # only the default, the table's and stream-K's
    LANEC_GEMM_STREAM=tiles,132 python bench/gemm.py build   # stream-K over those CTA counts ("tiles":
                                                         # one a tile, no partials: the machinery's own cost)
    LANEC_GEMM_ONLY="kimi qkv;llama down" python bench/gemm.py build   # only those products
    LANEC_GEMM_CHAIN=1 python bench/gemm.py build        # each schedule also timed in a chain: the step of
                                                         # a copy is an rmsnorm writing x, then the product
                                                         # (both PDL), less the norms alone; "best" and the
                                                         # table then follow the chain's time (the gemv and
                                                         # cuBLAS columns stay alone: compare schedules only)
    LANEC_GEMM_TABLE=1 python bench/gemm.py build        # only the default and the table's schedule
    LANEC_GEMM_TILES=1 python bench/gemm.py build        # only the default, the table's, the wide tiles
                                                         # (192 and 256 weight rows a CTA, from 128 rows) and
                                                         # two CTAs an SM (`occupancy` 2)

Every shape also times the table's schedule and the default with TMA loads (`loads: "tma"`: one
thread's cp.async.bulk.tensor a box; "producer": a producer warpgroup issues them; the tensor maps
encoded here as the runtime encodes them); the best column names the loads it took. Where a shape
has no more weight tiles than SMs, stream-K (`stream`: SM_COUNT CTAs dealing out the (tile, K stage)
units, a tile cut between two CTAs summed through a workspace) is timed at the default's stages and at
4, and from 128 rows in row blocks of 128 and 64 too; "best" names it "stream"."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import measure  # bench/measure.py: this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench" / "gemm"

PRODUCTS = [  # (label, K, parts)
    ("kimi qkv", 2304, [4096, 4096, 4096]),
    ("kimi kda merged", 2304, [4096, 4096, 4096, 128, 32, 128]),
    ("kimi q proj", 2304, [4096]),
    ("kimi o proj", 4096, [2304]),
    ("kimi dense gate", 2304, [9216]),
    ("kimi dense down", 9216, [2304]),
    ("kimi expert gate+up", 2304, [2048]),
    ("kimi lm head", 2304, [163840]),
    ("kimi mla q+kv_a", 2304, [6144, 512, 64]),  # an MLA layer's query, latent and rope products in parts
    ("llama qkv", 4096, [4096, 1024, 1024]),
    ("llama o proj", 4096, [4096]),
    ("llama gate+up", 4096, [28672]),
    ("llama down", 14336, [4096]),
    ("llama lm head", 4096, [128256]),
]
# gated pairs (label, K, hidden): one gemm_tc launch of gate and up tiles side by side, SwiGLU in its
# epilogue, y [rows, hidden]; cuBLAS's anchor is its product of 2 x hidden outputs, then torch's
# silu(gate) * up; the gemv column is gated_gemv's 32-row launches
GATED = [
    ("kimi dense pair", 2304, 9216),
    ("llama gate+up pair", 4096, 14336),
]
ROWS = [int(r) for r in os.environ.get("LANEC_GEMM_ROWS", "16,33,64,128,256").split(",")]
BLOCK_ROWS = (64, 128)  # row-block variants, timed where the rows are more than one block of them
WIDE_TILES = (192, 256)  # weight rows a CTA past the default 128 (wgmma: a consumer warpgroup a 64)
GEMV_ROWS = 32
ROTATE_BYTES = 256 * 2**20
CHAIN_EPS = 1e-6  # the chain's norm (LANEC_GEMM_CHAIN): its weights are ones
REPEATS = 15


def slug(label: str) -> str:
    return label.replace(" ", "_").replace("+", "")


def variants(make) -> list[dict]:
    """The schedules timed beside the default (the wgmma engine at the kernel's own choice), to
    tune it: from 128 rows row blocks of 64 and 128 at 3 and 4 stages; the table's schedule and the
    default with TMA loads (one thread, and a producer warpgroup), and the producer multicasting the
    row box over clusters of 2 and 4 weight tiles; every K split of 1 to 8 the kernel takes
    (odd ones too: 18 tiles in 7 are 126 CTAs, one wave) where the grid stays within 8 waves of the SMs, each
    at the default's stages and
    at 4 (more CTAs' worth of shared memory); the wider weight tiles (192 and 256 rows) from 128 rows and
    two CTAs an SM (`occupancy` 2: 128 or 192 rows from 128 rows, 64 rows over K splits of 1-8 below);
    and the mma.sync engine at its default, the engine before wgmma. LANEC_GEMM_TMA keeps the table's
    and the TMA ones, LANEC_GEMM_TABLE the table's, LANEC_GEMM_TILES the table's and the tile and
    occupancy ones, LANEC_GEMM_BLOCKS all but the splits and mma.sync."""
    from lanec.codegen.facts import SM_COUNT
    from lanec.codegen.schedules import schedule_for

    default = make(None)
    found = []
    if default.engine == "wgmma" and default.rows >= 128:
        for block_rows in BLOCK_ROWS:
            for stages in (3, 4):
                if block_rows < default.rows:
                    found.append({"block_rows": block_rows, "stages": stages})
    shape = {"rows": default.rows, "width": default.width, "outputs": default.outputs}
    if default.gated:  # a gated pair's launch is tuned apart (Lowering.product_shape)
        shape["gated"] = 1
    tuned = schedule_for("gemm_tc", shape)
    table = [tuned["schedule"]] if "schedule" in tuned else []
    by_tma = []
    bases = [table[0], {}] if table else [{}]  # the table's schedule and the kernel's default
    multicasts = [{"loads": "producer", "multicast": m} for m in (2, 4)]  # the row box shared over a cluster
    for schedule in [{**base, "loads": loads} for loads in ("tma", "producer") for base in bases] + multicasts:
        try:
            make(schedule)
        except ValueError:  # a table entry on the mma engine: no TMA there
            continue
        by_tma.append(schedule)
    if os.environ.get("LANEC_GEMM_TMA"):
        return table + by_tma
    if os.environ.get("LANEC_GEMM_TABLE"):
        return table
    tiles = []
    candidates = []
    if default.engine == "wgmma" and default.rows >= 128 and not default.gated:
        # from 128 rows: the wider weight tiles (3 or 4 consumer warpgroups) in blocks of 64 and 128 rows; and
        # two CTAs an SM (each in half the registers and shared memory) at 128 and 192 weight rows
        candidates += [{"tile_n": tile_n, "block_rows": block_rows, "stages": stages, "loads": "producer",
                        **({"multicast": multicast} if multicast > 1 else {})}
                       for tile_n in WIDE_TILES for block_rows in BLOCK_ROWS for stages in (3, 4, 5)
                       for multicast in (1, 2)]
        candidates += [{"tile_n": tile_n, "block_rows": block_rows, "stages": stages, "loads": loads, "occupancy": 2}
                       for tile_n in (128, 192) for block_rows in BLOCK_ROWS for stages in (2, 3, 4)
                       for loads in ("producer", "copies")]
    elif default.engine == "wgmma" and not default.gated:  # up to 64 rows: two CTAs an SM over split K
        candidates += [{"tile_n": 64, "splits": splits, "stages": stages, "occupancy": 2}
                       for splits in range(1, 9) for stages in (4, 5, 6, 7)]
        candidates += [{"tile_n": 128, "splits": splits, "stages": stages, "occupancy": 2}
                       for splits in (1, 2, 3, 4) for stages in (4, 5)]
    for schedule in candidates:
        try:
            kernel = make(schedule)
        except ValueError:  # the accumulators or the stages do not fit
            continue
        if kernel.splits * kernel.row_blocks * kernel.n_tiles <= 8 * SM_COUNT:
            tiles.append(schedule)
    if os.environ.get("LANEC_GEMM_TILES"):
        return table + tiles
    found += tiles
    streams = []
    asked = os.environ.get("LANEC_GEMM_STREAM", "1")
    counts = [SM_COUNT] if asked == "1" else [default.n_tiles * default.row_blocks if c == "tiles" else int(c)
                                             for c in asked.split(",")]
    for ctas in counts:
        for knobs in [{}, {"stages": 4}, *({"block_rows": b} for b in BLOCK_ROWS if b < default.rows)]:
            schedule = {"stream": ctas, **knobs}
            try:
                make(schedule)
            except ValueError:  # more tiles than CTAs (or too much shared memory)
                continue
            if schedule not in streams:
                streams.append(schedule)
    if "LANEC_GEMM_STREAM" in os.environ:
        return table + streams
    found += by_tma + streams
    if os.environ.get("LANEC_GEMM_BLOCKS"):  # with the table's own entry, so a rewrite keeps the best
        return found + table
    for splits in range(1, 9):
        for stages in sorted({default.stages, 4}):
            try:
                kernel = make({"splits": splits, "stages": stages})
            except ValueError:
                continue
            if kernel.splits * kernel.row_blocks * kernel.n_tiles <= 8 * SM_COUNT:
                found.append({"splits": splits, "stages": stages})
    return found if default.gated else [*found, {"engine": "mma"}]  # no gated pair on mma.sync


def cublas_step(torch, x, w, y, both=None) -> None:
    """The anchor's launch: y = x w^T by torch's matmul (cuBLAS); a gated pair's (`both`: its
    [rows, 2 hidden] product) then y = silu(gate) * up by torch."""
    if both is None:
        torch.matmul(x, w.t(), out=y)
        return
    torch.matmul(x, w.t(), out=both)
    hidden = both.shape[1] // 2
    torch.mul(torch.nn.functional.silu(both[:, :hidden]), both[:, hidden:], out=y)


def build() -> None:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.gated_gemv import GatedGemv
    from lanec.codegen.kernels.gemm_tc import GemmTc
    from lanec.codegen.kernels.gemv import Gemv
    from lanec.codegen.kernels.rmsnorm import RmsNorm
    from lanec.codegen.schedules import schedule_for

    entries, built = [], set()

    def add(kernel, stem: str) -> None:
        if stem not in built:
            compile_kernel(kernel).save(OUT, stem)
            built.add(stem)

    only = os.environ.get("LANEC_GEMM_ONLY")
    shapes = [(label, k, parts, False) for label, k, parts in PRODUCTS]
    shapes += [(label, k, [2 * hidden], True) for label, k, hidden in GATED]
    for label, k, parts, gated in shapes:
        if only and label not in only.split(";"):
            continue
        n = sum(parts)
        for rows in ROWS:
            def make(schedule, rows=rows, k=k, parts=parts, gated=gated):
                return GemmTc(rows, k, parts, schedule=schedule, gated=gated)

            default = make(None)
            schedules = []
            for schedule in [None, *variants(make)]:
                kernel = make(schedule)
                knobs = {"tile_n": kernel.tile_n, "splits": kernel.splits, "stages": kernel.stages,
                         "engine": kernel.engine}
                blocks = ""
                if schedule and schedule.get("block_rows"):
                    knobs["block_rows"] = schedule["block_rows"]
                    blocks = f"_b{schedule['block_rows']}"
                if getattr(kernel, "loads", "copies") != "copies":
                    knobs["loads"] = kernel.loads
                    blocks += f"_{kernel.loads}"
                if getattr(kernel, "multicast", 1) > 1:
                    knobs["multicast"] = kernel.multicast
                    blocks += f"_m{kernel.multicast}"
                if getattr(kernel, "occupancy", 1) > 1:
                    knobs["occupancy"] = kernel.occupancy
                    blocks += f"_occ{kernel.occupancy}"
                if getattr(kernel, "stream_ctas", 0):
                    knobs["stream"] = kernel.stream_ctas
                    blocks += f"_stream{kernel.stream_ctas}"
                if schedule is not None and knobs == schedules[0]["schedule"]:
                    continue  # the default's own
                stem = (f"{slug(label)}_r{rows}_t{kernel.tile_n}_k{kernel.splits}_s{kernel.stages}{blocks}_"
                        f"{kernel.engine}")
                if any(timed["stem"] == stem for timed in schedules):
                    continue  # two knobs' sets that make the same kernel
                add(kernel, stem)
                schedules.append({"stem": stem, "schedule": knobs, "grid": list(kernel.launch().grid)})
            # the gemv launches the lowering made before gemm_tc: 32 rows each, the rest in the last
            # (a gated pair's: gated_gemv's, gate and up apart)
            chunks = []
            for first in range(0, rows, GEMV_ROWS):
                count = min(GEMV_ROWS, rows - first)
                chunk = f"gemv_{slug(label)}_r{count}"
                if gated:
                    add(GatedGemv(count, k, n // 2, **schedule_for("gated_gemv", {"rows": count, "width": k,
                                                                                  "outputs": n // 2})), chunk)
                else:
                    add(Gemv(count, k, parts, **schedule_for("gemv", {"rows": count, "width": k, "outputs": n})),
                        chunk)
                chunks.append({"stem": chunk, "first": first})
            entry = {"label": label, "k": k, "n": n, "rows": rows, "gated": gated, "schedules": schedules,
                     "gemv": chunks}
            if os.environ.get("LANEC_GEMM_CHAIN"):  # the predecessor a step gives a product: a norm writing x
                norm = f"norm_r{rows}_k{k}"
                add(RmsNorm(rows, k, CHAIN_EPS), norm)
                entry["norm"] = norm
            entries.append(entry)
            print(f"{label:20s} r{rows:<4d} default grid {default.launch().grid} tile {default.tile_n} splits "
                  f"{default.splits} stages {default.stages}; {len(schedules) - 1} variants", flush=True)
    (OUT / "manifest.json").write_text(json.dumps(entries, indent=1) + "\n")
    print(f"{len(entries)} shapes, {len(built)} kernels in {OUT.relative_to(ROOT)}")


def run() -> list:
    import torch

    sys.path.insert(0, str(ROOT))
    from lanec.runtime import driver
    from lanec.runtime.artifact import load_artifact

    device = driver.Device(0)
    torch.cuda.init()
    entries = json.loads((OUT / "manifest.json").read_text())
    torch_stream = torch.cuda.Stream()
    ours_stream = driver.Stream()

    def events_us(fn, repeats=REPEATS) -> float:
        return measure.events_us(torch, torch_stream, fn, repeats)

    copy_bw, peak = measure.ceilings(torch, torch_stream, device.name)

    functions: dict[str, tuple] = {}

    def function(stem: str):
        if stem not in functions:
            art = load_artifact(OUT, stem)
            functions[stem] = (driver.Module(art.cubin).function(art.entry, art.launch), art.launch)
        return functions[stem]

    def graph_us(launches: list, copies: int) -> float:
        return measure.graph_us(driver, ours_stream, launches, REPEATS) / copies

    # stream-K's workspace, shared by its launches as a plan's are (flags poisoned: not raised)
    from lanec.codegen.facts import GEMM_STREAM_SLOT, SM_COUNT

    partials = torch.empty(SM_COUNT, GEMM_STREAM_SLOT, dtype=torch.float32, device="cuda")
    flags = torch.full((SM_COUNT,), -1, dtype=torch.int32, device="cuda")
    results, weights_key, weights = [], None, None
    for e in entries:
        k, n, rows = e["k"], e["n"], e["rows"]
        weight_bytes = 2 * n * k
        copies = max(1, math.ceil(ROTATE_BYTES / weight_bytes))
        if weights_key != (k, n):
            weights = None
            torch.cuda.empty_cache()
            weights = torch.empty(copies, n, k, dtype=torch.bfloat16, device="cuda").normal_()
            weights_key = (k, n)
        gated = e.get("gated", False)
        x = torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
        y = torch.empty(rows, n // 2 if gated else n, dtype=torch.bfloat16, device="cuda")
        both = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda")  # cuBLAS's gate and up, gated
        torch.cuda.synchronize()

        norms, norms_us = [], 0.0  # LANEC_GEMM_CHAIN: a norm writing x before each product, timed alone too
        if "norm" in e:
            h = torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
            ones = torch.ones(k, dtype=torch.bfloat16, device="cuda")
            nfn, nshape = function(e["norm"])
            norms = [driver.Launch(nfn, nshape, [h.data_ptr(), ones.data_ptr(), x.data_ptr()], ours_stream)
                     for _ in range(copies)]
            norms_us = graph_us(norms, copies)
        timed = []  # (us, schedule entry), the default first; in a chain, its time there less the norms'
        for variant in e["schedules"]:
            fn, shape = function(variant["stem"])
            params = load_artifact(OUT, variant["stem"]).params
            maps = driver.TensorMaps(copies * sum(p.tensor_map is not None for p in params))
            addresses = {"x": x.data_ptr(), "y": y.data_ptr(), "partials": partials.data_ptr(),
                         "flags": flags.data_ptr()}
            launches = [driver.Launch(fn, shape, maps.pointers(params, {**addresses, "w": weights[c].data_ptr()}),
                                      ours_stream) for c in range(copies)]
            maps.upload()
            if norms:
                alone = graph_us(launches, copies)
                chained = [launch for pair in zip(norms, launches, strict=True) for launch in pair]
                us = graph_us(chained, copies) - norms_us
                variant = {**variant, "alone_us": round(alone, 2)}
            else:
                us = graph_us(launches, copies)
            timed.append((us, variant))
            maps.free()
        ours = timed[0][0]
        best = min(timed, key=lambda item: item[0])
        mma = next((us for us, variant in timed if variant["schedule"]["engine"] == "mma"), math.nan)
        gemv_launches = []
        for c in range(copies):
            for chunk in e["gemv"]:
                gfn, gshape = function(chunk["stem"])
                first = chunk["first"]
                halves = [weights[c].data_ptr(), weights[c][n // 2:].data_ptr()] if gated else [weights[c].data_ptr()]
                gemv_launches.append(driver.Launch(gfn, gshape, [x[first:].data_ptr(), *halves, y[first:].data_ptr()],
                                                   ours_stream))
        gemv = graph_us(gemv_launches, copies)

        with torch.cuda.stream(torch_stream):
            for c in range(copies):  # warm cuBLAS's choice outside the capture
                cublas_step(torch, x, weights[c], y, both if gated else None)
            torch_stream.synchronize()
            torch_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(torch_graph, stream=torch_stream):
                for c in range(copies):
                    cublas_step(torch, x, weights[c], y, both if gated else None)
        torch.cuda.synchronize()
        for _ in range(3):
            torch_graph.replay()
        cublas = events_us(torch_graph.replay) / copies
        del torch_graph

        roof_us = max(weight_bytes / copy_bw, 2 * rows * k * n / peak) * 1e6
        results.append((e, ours, best, gemv, cublas, roof_us, mma))
        print(f"  {e['label']:20s} r{rows:<4d} ours {ours:9.2f} us (best {best[0]:9.2f} at {best[1]['schedule']})"
              f"  mma {mma:9.2f} us  gemv {gemv:9.2f} us  cublas {cublas:9.2f} us", flush=True)
        if norms:
            print(f"      in a chain after a norm ({norms_us:.2f} us a copy, taken out); the default alone "
                  f"{timed[0][1]['alone_us']:.2f} us", flush=True)
        for us, variant in timed[1:]:  # every variant's time, to compare a knob's effect at one shape
            alone = f" (alone {variant['alone_us']:.2f})" if "alone_us" in variant else ""
            print(f"      {us:9.2f} us{alone}  {variant['schedule']}", flush=True)

    print()
    print(f"GPU: {device.name}; copy {copy_bw / 1e12:.2f} TB/s; bf16 tensor peak {peak / 1e12:.0f} TFLOP/s")
    print("| product | K -> N | rows | weights MB | default engine / splits / stages | ours us | % copy | % roof "
          "| cuBLAS us | x cuBLAS | gemv us | x gemv | mma.sync us | x mma.sync | best engine / splits / stages "
          "| best us | best x cuBLAS |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for e, ours, best, gemv, cublas, roof_us, mma in results:
        weight_bytes = 2 * e["n"] * e["k"]
        share = weight_bytes / (ours * 1e-6) / copy_bw
        default, fastest = e["schedules"][0]["schedule"], best[1]["schedule"]
        print(f"| {e['label']} | {e['k']} -> {e['n']} | {e['rows']} | {weight_bytes / 1e6:.1f} "
              f"| {default['engine']} / {default['splits']} / {default['stages']} | {ours:.2f} | {100 * share:.0f}% "
              f"| {100 * roof_us / ours:.0f}% | {cublas:.2f} | {cublas / ours:.2f} | {gemv:.2f} | {gemv / ours:.2f} "
              f"| {mma:.2f} | {mma / ours:.2f} | {fastest['engine']} / {fastest['splits']} / {fastest['stages']}"
              f"{' / tile ' + str(fastest['tile_n']) if fastest.get('tile_n', 128) != 128 else ''}"
              f"{' / ' + str(fastest['block_rows']) + ' rows a CTA' if 'block_rows' in fastest else ''}"
              f"{' / ' + fastest['loads'] if 'loads' in fastest else ''}"
              f"{' x' + str(fastest['multicast']) + ' multicast' if 'multicast' in fastest else ''}"
              f"{' / ' + str(fastest['occupancy']) + ' CTAs an SM' if 'occupancy' in fastest else ''}"
              f"{' / stream ' + str(fastest['stream']) if 'stream' in fastest else ''} "
              f"| {best[0]:.2f} | {cublas / best[0]:.2f} |")
    return results


# below GEMM_FROM_ROWS a shape's entry also moves its products from gemv to gemm_tc: it is written only
# where gemm_tc's fastest beats the gemv launch by this much (run-to-run noise)
GEMV_MARGIN = 0.03


def write_table(path: Path, results) -> None:
    """The fastest schedule timed per (rows, width, outputs), as lanec/codegen/schedules.py reads
    it, merged into what `path` holds (copy it to lanec/codegen/schedules.json once tests/gpu has
    checked those specializations). Below GEMM_FROM_ROWS the lowering takes an entry's existence as
    gemm_tc's measured win over gemv there: such a shape gets one only where gemm_tc beats the gemv
    launch by GEMV_MARGIN, and loses the one it had where it does not."""
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.facts import GEMM_FROM_ROWS

    table = json.loads(path.read_text()) if path.is_file() else {}
    entries = table.setdefault("gemm_tc", {})
    written = 0
    for e, _, (us, variant), gemv, *_ in results:
        key = f"{'gated=1,' if e.get('gated') else ''}outputs={e['n']},rows={e['rows']},width={e['k']}"
        if e["rows"] < GEMM_FROM_ROWS and us > (1 - GEMV_MARGIN) * gemv:
            entries.pop(key, None)
            continue
        entries[key] = {"schedule": variant["schedule"], "us": round(us, 2)}
        written += 1
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote the fastest gemm_tc schedules of {written} of {len(results)} shapes to {path}")

if __name__ == "__main__":
    measure.main(build, run, "gemm.py", write_table)
