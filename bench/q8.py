"""q8_0 GEMV and gated GEMV (int8 activations, one and two words) against our bf16 kernels and
torch's bf16 matmul (cuBLAS), at Llama-3.1-8B's and Kimi Linear's product shapes (LANEC_Q8_PRODUCTS:
some of them, by label), rows 1, 4 and 8, measured in the
same run; the quantize launch that feeds them; and the quantize epilogue (fuse-quant's: a gated pair
or a GEMV writing the quantized rows its q8_0 reader reads) against the same launch without it
and the standalone quantize it replaces. With LANEC_Q8_SET=tc instead (build and run) the batched
products, rows 33 to 256: q8_gemm_tc (int8 tensor cores, one and two words) against the q8_gemv
launches of 32 rows the lowering took before it, our bf16 gemm_tc at the table's schedule and
torch's bf16 matmul, with the byte roofline (the q8_0 bytes over the copy bandwidth). Two steps:

    python bench/q8.py build             # CPU machine: compile into build/bench/q8/ (q8-tc/ with the set)
    PYTHONPATH=. python3 bench/q8.py     # GPU machine (torch for the anchor): the table
    PYTHONPATH=. python3 bench/q8.py --write-table PATH   # and the q8 GEMVs' fastest schedules (schedules.json)

Method as bench/gemv.py's: clocks warmed by copies; each product's weights rotate over copies
past 240 MB (4x the L2), one launch a copy in a CUDA graph (ours with PDL), the median replay over
the copies. Bytes are the weights as stored: q8_0 34 bytes a 32-value block (scales included),
bf16 2 a value. `bf16 / q8` > 1: the q8_0 kernel is faster than ours on bf16 (about 1.9x at
the byte ratio); `% copy` is the bytes read over the device-to-device copy bandwidth (1 GiB,
read + write counted). The gated rows' torch anchor is one matmul over gate and up stacked."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import measure  # bench/measure.py: this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
TENSOR_CORES = os.environ.get("LANEC_Q8_SET") == "tc"
FLOOR_SET = os.environ.get("LANEC_Q8_SET") == "floor"
OUT = ROOT / "build" / "bench" / ("q8-tc" if TENSOR_CORES else "q8-floor" if FLOOR_SET else "q8")

# Llama-3.1-8B: hidden 4096, 32 query and 8 KV heads of 128, MLP 14336, vocab 128256; and Kimi
# Linear's (hidden 2304): the KDA layer's merged q k v f_a b g_a product, its o proj, the dense
# layer's gated pair and down, and the lm head (its experts read their q8_0 rows widened: bf16)
PRODUCTS = [  # (label, K, N); the gated pair's N is its hidden width
    ("qkv", 4096, 6144),
    ("o proj", 4096, 4096),
    ("down", 14336, 4096),
    ("lm head", 4096, 128256),
    ("gate+up pair", 4096, 14336),
    ("kimi kda merged", 2304, 12576),
    ("kimi o proj", 4096, 2304),
    ("kimi dense down", 9216, 2304),
    ("kimi lm head", 2304, 163840),
    ("kimi dense gate+up pair", 2304, 9216),
    # examples/dense-small-q8.mlir's (hidden 2048, MLP 8192): the q8_0 step bench/q8_step.py times
    ("small qkv", 2048, 3072),
    ("small o proj", 2048, 2048),
    ("small down", 8192, 2048),
    ("small gate+up pair", 2048, 8192),
]
if os.environ.get("LANEC_Q8_PRODUCTS"):  # a subset by label, comma-separated (a shorter run)
    PRODUCTS = [p for p in PRODUCTS if p[0] in os.environ["LANEC_Q8_PRODUCTS"].split(",")]
ROWS = [1, 4, 8]
if FLOOR_SET:  # the launch floor (bench/gemv.py's FLOOR): one row, one word, K = 2304, 1024 to 163840 outputs
    PRODUCTS = [(f"floor {n}", 2304, n) for n in (1024, 2048, 4096, 8192, 12288, 16384, 32768, 65536, 163840)]
    ROWS = [1]
# the products whose output a q8_0 product reads: the gated pair's hidden rows (read by down) and a
# LoRA pair's first product; each output width has its standalone quantize among the K widths above
EPILOGUE_PRODUCTS = [p for p in [("gate+up pair", 4096, 14336), ("o proj", 4096, 4096)] if p in PRODUCTS]
WORDS = [1] if FLOOR_SET else [1, 2]
# schedules timed beside the q8 defaults at one row (RowSchedule knobs: CUDA cores only); 9
# warps give a 2304-wide row (288 quarter blocks) one quarter a thread, where 8 leave a second step of 32
SCHEDULES = [{"warps": 4, "rows_per_cta": 4}, {"warps": 8, "rows_per_cta": 4}, {"warps": 4, "rows_per_cta": 2},
             {"warps": 9, "rows_per_cta": 2}, {"warps": 9, "rows_per_cta": 4}, {"warps": 16, "rows_per_cta": 2}]
if FLOOR_SET:  # a 2304-wide row is 288 quarter blocks: 9 warps take it in one step, where 8 leave 32 for a second
    SCHEDULES = [{"warps": 8, "rows_per_cta": 2}, {"warps": 9, "rows_per_cta": 2}, {"warps": 9, "rows_per_cta": 4}]
ROTATE_BYTES = 240 * 2**20


TC_ROWS = [33, 64, 128, 256]  # the batched set's rows: above q8_gemv's 32-row launches
# q8_gemm_tc schedules timed beside its default (one word): fewer stages let two CTAs share an SM
TC_SCHEDULES = [{"stages": 6}, {"stages": 2}, {"stages": 3, "tile_n": 64}, {"stages": 2, "block_rows": 32},
                {"stages": 3, "block_rows": 64}]
GEMV_ROWS = 32


def q8_bytes(k: int, n: int) -> int:
    return n * k // 32 * 34


def build_tensor_cores(add) -> None:
    """The batched set: each product (the gated pair as one product of its 2 x hidden rows) at
    TC_ROWS as q8_gemm_tc (one and two words) and bf16 gemm_tc, and q8_gemv's 32-row launch."""
    from lanec.codegen.kernels.gemm_tc import GemmTc
    from lanec.codegen.kernels.q8_gemm import Q8GemmTc
    from lanec.codegen.kernels.q8_gemv import Q8Gemv
    from lanec.codegen.schedules import schedule_for

    for label, k, n in PRODUCTS:
        n = 2 * n if "pair" in label else n
        slug = label.replace(" ", "_").replace("+", "")
        shape = {"label": label, "k": k, "n": n, "gated": False}
        for words in WORDS:
            add(Q8Gemv(GEMV_ROWS, k, (n,), words=words), f"{slug}_r{GEMV_ROWS}_w{words}_gemv", kind="q8_rows",
                words=words, default=True, rows=GEMV_ROWS, **shape)
        for rows in TC_ROWS:
            tuned = schedule_for("gemm_tc", {"rows": rows, "width": k, "outputs": n})
            add(GemmTc(rows, k, (n,), **tuned), f"{slug}_r{rows}_bf16_tc", kind="bf16", words=0, default=True,
                rows=rows, **shape)
            for words in WORDS:
                add(Q8GemmTc(rows, k, (n,), words=words), f"{slug}_r{rows}_w{words}_tc", kind="q8_tc", words=words,
                    default=True, rows=rows, **shape)
            for i, schedule in enumerate(TC_SCHEDULES):
                asked = {"block_rows": schedule["block_rows"]} if "block_rows" in schedule else {}
                try:
                    kernel = Q8GemmTc(rows, k, (n,), schedule=schedule)
                except ValueError:  # more stages than the SM's shared memory holds at these rows
                    continue
                add(kernel, f"{slug}_r{rows}_w1_tc_s{i}", kind="q8_tc", words=1, default=False, rows=rows, **shape,
                    **asked)


def build() -> None:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.elementwise import Elementwise
    from lanec.codegen.kernels.gated_gemv import GatedGemv
    from lanec.codegen.kernels.gemv import Gemv
    from lanec.codegen.kernels.head_norm import HeadNorm
    from lanec.codegen.kernels.q8_gemv import Q8GatedGemv, Q8Gemv
    from lanec.codegen.kernels.quantize import Quantize
    from lanec.codegen.kernels.rmsnorm import RmsNorm

    entries = []

    def add(kernel, stem, **info):
        compiled = compile_kernel(kernel)
        compiled.save(OUT, stem)
        schedule = f"{kernel.warps}w x {kernel.rows_per_cta}r" if hasattr(kernel, "rows_per_cta") else ""
        knobs = {}
        if hasattr(kernel, "rows_per_cta"):  # a GEMV's knobs as the table names them
            knobs = {"warps": kernel.warps, "rows_per_cta": kernel.rows_per_cta}
        if hasattr(kernel, "tile_n"):  # q8_gemm_tc's knobs as the table names them (block_rows where asked)
            schedule = f"{kernel.tile_n} x {kernel.padded_rows}, {kernel.splits} splits, {kernel.stages} stages"
            knobs = {"tile_n": kernel.tile_n, "splits": kernel.splits, "stages": kernel.stages,
                     **({"block_rows": info.pop("block_rows")} if "block_rows" in info else {})}
        entries.append({"stem": stem, "schedule": schedule, "knobs": knobs, **info})
        print(f"{stem:44s} grid {compiled.launch.grid} x {compiled.launch.block[0]}")

    if TENSOR_CORES:
        build_tensor_cores(add)
        (OUT / "manifest.json").write_text(json.dumps(entries, indent=1) + "\n")
        print(f"{len(entries)} kernels in {OUT.relative_to(ROOT)}")
        return
    for label, k, n in PRODUCTS:
        gated = "pair" in label
        slug = label.replace(" ", "_").replace("+", "")
        for rows in ROWS:
            shape = {"label": label, "k": k, "n": n, "rows": rows, "gated": gated}
            bf16 = GatedGemv(rows, k, n) if gated else Gemv(rows, k, (n,))
            add(bf16, f"{slug}_r{rows}_bf16", kind="bf16", words=0, default=True, **shape)
            for words in WORDS:
                make = (lambda s, rows=rows, k=k, n=n, words=words: Q8GatedGemv(rows, k, n, words=words, schedule=s)) \
                    if gated else (lambda s, rows=rows, k=k, n=n, words=words: Q8Gemv(rows, k, (n,), words=words,
                                                                                       schedule=s))
                default = make(None)
                add(default, f"{slug}_r{rows}_w{words}", kind="q8", words=words, default=True, **shape)
                for schedule in SCHEDULES if rows == 1 else []:
                    try:
                        kernel = make(schedule)
                    except ValueError:  # more held weights than a thread's registers: not a schedule
                        continue
                    if (kernel.warps, kernel.rows_per_cta) != (default.warps, default.rows_per_cta):
                        add(kernel, f"{slug}_r{rows}_w{words}_w{kernel.warps}r{kernel.rows_per_cta}", kind="q8",
                            words=words, default=False, **shape)
    for width in sorted({k for _, k, _ in PRODUCTS}):
        for rows in ROWS:
            for words in WORDS:
                add(Quantize(rows, width, words), f"quantize_k{width}_r{rows}_w{words}", kind="quantize",
                    words=words, default=True, label="quantize", k=width, n=0, rows=rows, gated=False)
    # the quantize epilogue (fuse-quant: the product writes the quantized rows its q8_0 reader reads),
    # beside the same launch without it and the standalone quantize it replaces
    for label, k, n in EPILOGUE_PRODUCTS:
        gated = "pair" in label
        slug = label.replace(" ", "_").replace("+", "")
        for rows in ROWS:
            for words in WORDS:
                kernel = (Q8GatedGemv(rows, k, n, words=words, quantize=words) if gated
                          else Q8Gemv(rows, k, (n,), words=words, quantize=words))
                add(kernel, f"{slug}_r{rows}_w{words}_epilogue", kind="q8_epilogue", words=words, default=True,
                    label=label, k=k, n=n, rows=rows, gated=gated)
    # the row-local epilogues (a norm, an elementwise op, a gated head norm) and the tensor-core gated
    # pair at 32 outputs a CTA (whole blocks: no ticket), each beside the same launch without it
    for rows in ROWS:
        for words in [0, *WORDS]:
            tag = f"_q{words}" if words else "_plain"
            for label, width, kernel in [
                ("rmsnorm + residual", 4096, RmsNorm(rows, 4096, 1e-5, residual=True, quantize=words)),
                ("swiglu", 14336, Elementwise("swiglu", rows, 14336, quantize=words)),
                ("gated head norm", 4096, HeadNorm(rows, 32, 128, 1e-6, gate="sigmoid", quantize=words)),
            ] + ([("bf16 gate+up pair, 32 outputs a CTA", 14336,
                   GatedGemv(rows, 4096, 14336, quantize=words, schedule={"tensor_cores": True, "rows_per_cta": 32}))]
                 if rows > 1 else []):
                slug = label.split(",")[0].replace(" ", "_").replace("+", "")
                add(kernel, f"row_{slug}_r{rows}{tag}", kind="row_epilogue", words=words, default=True,
                    label=label, k=width, n=width, rows=rows, gated=False)
    (OUT / "manifest.json").write_text(json.dumps(entries, indent=1) + "\n")
    print(f"{len(entries)} kernels in {OUT.relative_to(ROOT)}")


def cublas_products(torch, x, weights, out):
    """torch's anchor: x times each copy's weights ([copies, sources, n, k], sources stacked as
    one matrix), one cuBLAS matmul a copy into `out`."""
    copies, sources, n, k = weights.shape

    def products() -> None:
        for i in range(copies):
            torch.matmul(x, weights[i].reshape(sources * n, k).t(), out=out)

    return products


def run() -> list:
    import torch

    from lanec.runtime import driver
    from lanec.runtime.artifact import load_artifact

    device = driver.Device(0)
    torch.cuda.init()
    entries = json.loads((OUT / "manifest.json").read_text())
    torch_stream = torch.cuda.Stream()
    ours_stream = driver.Stream()

    def torch_time(fn, repeats=25) -> float:
        return measure.events_us(torch, torch_stream, fn, repeats)

    copy_tbs = measure.ceilings(torch, torch_stream, device.name)[0] / 1e12  # clocks warmed first

    def ours(stem: str, pointers: list) -> float:
        """Median us of one launch of `stem`, a graph of one launch a pointer list (its tensors in
        entry order; a kernel with tensor maps, gemm_tc's TMA loads: the maps encoded after them, as
        the runtime encodes them)."""
        artifact = load_artifact(OUT, stem)
        function = driver.Module(artifact.cubin).function(artifact.entry, artifact.launch)
        mapped = sum(p.tensor_map is not None for p in artifact.params)
        maps = driver.TensorMaps(len(pointers) * mapped) if mapped else None
        if maps is not None:
            names = [p.name for p in artifact.params if p.tensor_map is None]
            pointers = [maps.pointers(artifact.params, dict(zip(names, p, strict=True))) for p in pointers]
            maps.upload()
        launches = [driver.Launch(function, artifact.launch, p, ours_stream) for p in pointers]
        us = measure.graph_us(driver, ours_stream, launches, repeats=25) / len(pointers)
        if maps is not None:
            maps.free()
        return us

    results = []
    for entry in entries:
        k, n, rows, words = entry["k"], entry["n"], entry["rows"], entry["words"]
        torch.cuda.empty_cache()
        if entry["kind"] == "quantize":
            x = torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
            q = torch.empty(rows, words * k + k // 8 + 16, dtype=torch.int8, device="cuda")
            us = ours(entry["stem"], [[x.data_ptr(), q.data_ptr()]] * 16)
            results.append((entry, us, None, None))
            print(f"  {entry['stem']:44s} {us:8.2f} us", flush=True)
            continue
        if entry["kind"] == "row_epilogue":  # every param from the artifact: random inputs, poisoned scratch
            tensors = []
            for param in load_artifact(OUT, entry["stem"]).params:
                if param.dtype == "bfloat16":
                    tensors.append(torch.randn(param.shape, dtype=torch.bfloat16, device="cuda"))
                elif param.dtype == "int8":
                    tensors.append(torch.empty(param.shape, dtype=torch.int8, device="cuda"))
                elif param.dtype == "float32":
                    tensors.append(torch.empty(param.shape, dtype=torch.float32, device="cuda"))
                else:  # a ticket a block: the kernel counts modulo its CTAs from any start
                    tensors.append(torch.full(param.shape, -1, dtype=torch.int32, device="cuda"))
            us = ours(entry["stem"], [[t.data_ptr() for t in tensors]] * 16)
            results.append((entry, us, None, None))
            print(f"  {entry['stem']:44s} {us:8.2f} us", flush=True)
            continue
        sources = 2 if entry["gated"] else 1
        q8 = entry["kind"] in ("q8", "q8_epilogue", "q8_rows", "q8_tc")
        stored = sources * (q8_bytes(k, n) if q8 else 2 * n * k)
        copies = max(1, math.ceil(ROTATE_BYTES / stored))
        if q8:
            weights = torch.randint(-127, 127, (copies, sources, n, k // 32 * 34), dtype=torch.int8, device="cuda")
            x = torch.randint(-127, 127, (rows, words * k + k // 8 + 16), dtype=torch.int8, device="cuda")
        else:
            weights = torch.empty(copies, sources, n, k, dtype=torch.bfloat16, device="cuda").normal_()
            x = torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
        y = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda")
        scratch = []
        if entry["kind"] == "q8_epilogue":  # the quantized rows, the staged fp32 values, a ticket a block
            y = torch.empty(rows, words * n + n // 8 + 16, dtype=torch.int8, device="cuda")
            scratch = [torch.empty(rows, n, dtype=torch.float32, device="cuda"),
                       torch.full((max(2, n // 32),), -1, dtype=torch.int32, device="cuda")]
        pointers = [[x.data_ptr(), *(weights[i, s].data_ptr() for s in range(sources)), y.data_ptr(),
                     *(t.data_ptr() for t in scratch)] for i in range(copies)]
        us = ours(entry["stem"], pointers)
        torch_us = None
        if entry["kind"] == "bf16":
            out = torch.empty(rows, sources * n, dtype=torch.bfloat16, device="cuda")
            torch_us = measure.torch_graph_us(torch, torch_stream, cublas_products(torch, x, weights, out),
                                              repeats=25) / copies
        tbs = stored / us / 1e6
        results.append((entry, us, tbs, torch_us))
        anchor = f"  torch {torch_us:8.2f} us" if torch_us else ""
        print(f"  {entry['stem']:44s} {us:8.2f} us {tbs:5.2f} TB/s{anchor}", flush=True)
        del weights

    print()
    print(f"GPU: {device.name}; copy ceiling {copy_tbs:.2f} TB/s")
    if TENSOR_CORES:
        tensor_core_table(results, copy_tbs)
        return results
    print("| product | K -> N | rows | words | MB read | schedule | us | TB/s | % copy | bf16 us | bf16 / q8 "
          "| torch us | torch / q8 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    anchors = {(e["label"], e["rows"]): (us, t) for e, us, _, t in results if e["kind"] == "bf16"}
    for entry, us, tbs, _ in results:
        if entry["kind"] != "q8" or not entry["default"]:
            continue
        bf16_us, torch_us = anchors[(entry["label"], entry["rows"])]
        megabytes = (2 if entry["gated"] else 1) * q8_bytes(entry["k"], entry["n"]) / 1e6
        print(f"| {entry['label']} | {entry['k']} -> {entry['n']} | {entry['rows']} | {entry['words']} "
              f"| {megabytes:.1f} | {entry['schedule']} | {us:.2f} | {tbs:.2f} | {100 * tbs / copy_tbs:.0f}% "
              f"| {bf16_us:.2f} | {bf16_us / us:.2f} | {torch_us:.2f} | {torch_us / us:.2f} |")
    if FLOOR_SET:
        print()
        print(floor_lines(results, copy_tbs))
    print()
    print("q8 schedules at one row (warps x weight rows a CTA; * = default): us")
    schedules_table(results, lambda e: e["kind"] == "q8" and e["rows"] == 1, lambda e: f"{e['label']} w{e['words']}")
    print()
    print("quantize (the standalone launch before a q8 product): us")
    quantize_us = {}
    for entry, us, _, _ in results:
        if entry["kind"] == "quantize":
            quantize_us[(entry["k"], entry["rows"], entry["words"])] = us
            print(f"  width {entry['k']:6d} rows {entry['rows']} words {entry['words']}: {us:.2f}")
    print()
    print("| product (its output quantized) | rows | words | q8 us | with the epilogue us | epilogue cost "
          "| quantize us | saved us (q8 + quantize - with epilogue) |")
    print("|---|---|---|---|---|---|---|---|")
    plain = {(e["label"], e["rows"], e["words"]): us for e, us, _, _ in results if e["kind"] == "q8" and e["default"]}
    for entry, us, _, _ in results:
        if entry["kind"] != "q8_epilogue":
            continue
        key = (entry["label"], entry["rows"], entry["words"])
        base, alone = plain[key], quantize_us[(entry["n"], entry["rows"], entry["words"])]
        print(f"| {entry['label']} | {entry['rows']} | {entry['words']} | {base:.2f} | {us:.2f} "
              f"| {100 * (us / base - 1):+.1f}% | {alone:.2f} | {base + alone - us:.2f} |")
    print()
    print("| launch (its output quantized) | rows | words | plain us | with the epilogue us | epilogue cost "
          "| quantize us | saved us (plain + quantize - with epilogue) |")
    print("|---|---|---|---|---|---|---|---|")
    rowwise = {(e["label"], e["rows"], e["words"]): us for e, us, _, _ in results if e["kind"] == "row_epilogue"}
    for (label, rows, words), us in rowwise.items():
        if not words:
            continue
        width = next(e["k"] for e, *_ in results if e["kind"] == "row_epilogue" and e["label"] == label)
        base = rowwise[(label, rows, 0)]
        alone = quantize_us.get((width, rows, words))
        saved = f"{base + alone - us:.2f}" if alone is not None else "-"
        print(f"| {label} | {rows} | {words} | {base:.2f} | {us:.2f} | {100 * (us / base - 1):+.1f}% "
              f"| {alone if alone is not None else float('nan'):.2f} | {saved} |")
    return results


def floor_lines(results: list, copy_tbs: float) -> str:
    """The launch floor (`LANEC_Q8_SET=floor`): q8_gemv's (each schedule's), our bf16 gemv's and
    torch's times at one row fitted to t = floor + bytes / rate (bench/gemv.py's `floor_fit`), and
    the share of the copy bandwidth each fit allows a product of 10 to 100 MB of its own bytes."""
    from gemv import floor_fit, floor_line  # bench/gemv.py, beside this script

    sides: dict[str, list] = {}
    for entry, us, _, torch_us in results:
        if entry["kind"] == "q8":  # a fit per schedule
            sides.setdefault(f"q8_gemv {entry['schedule']}", []).append((q8_bytes(entry["k"], entry["n"]), us))
        elif entry["kind"] == "bf16":
            sides.setdefault("bf16 gemv", [])
            sides.setdefault("torch bf16", [])
            sides["bf16 gemv"].append((2 * entry["k"] * entry["n"], us))
            sides["torch bf16"].append((2 * entry["k"] * entry["n"], torch_us))
    return "\n".join(floor_line(name, *floor_fit(points), copy_tbs) for name, points in sides.items())


def tensor_core_table(results: list, copy_tbs: float) -> None:
    """The batched set's table: q8_gemm_tc against q8_gemv's 32-row launches (as many as the rows
    need), bf16 gemm_tc and torch, and the q8_0 bytes' share of the copy bandwidth."""
    gemv = {(e["label"], e["words"]): us for e, us, _, _ in results if e["kind"] == "q8_rows"}
    bf16 = {(e["label"], e["rows"]): (us, t) for e, us, _, t in results if e["kind"] == "bf16"}
    print("| product | K -> N | rows | words | MB read | q8_gemm_tc schedule | us | % copy | q8_gemv launches us "
          "| q8_gemv / tc | bf16 gemm_tc us | bf16 / q8 | torch bf16 us | torch / q8 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for entry, us, tbs, _ in results:
        if entry["kind"] != "q8_tc" or not entry["default"]:
            continue
        label, rows, words = entry["label"], entry["rows"], entry["words"]
        launches = gemv[(label, words)] * -(-rows // GEMV_ROWS)
        bf16_us, torch_us = bf16[(label, rows)]
        megabytes = q8_bytes(entry["k"], entry["n"]) / 1e6
        print(f"| {label} | {entry['k']} -> {entry['n']} | {rows} | {words} | {megabytes:.1f} "
              f"| {entry['schedule']} | {us:.2f} | {100 * tbs / copy_tbs:.0f}% | {launches:.2f} | {launches / us:.2f} "
              f"| {bf16_us:.2f} | {bf16_us / us:.2f} | {torch_us:.2f} | {torch_us / us:.2f} |")
    print()
    print("q8_gemm_tc schedules, one word (tile x padded rows, splits, stages; * = default): us")
    schedules_table(results, lambda e: e["kind"] == "q8_tc" and e["words"] == 1,
                    lambda e: f"{e['label']} {e['rows']} rows")


def schedules_table(results: list, chosen, name) -> None:
    """One line per `name(entry)` of the `chosen` entries: each schedule's time, the default starred."""
    cells: dict[str, list] = {}
    for entry, us, _, _ in results:
        if chosen(entry):
            cells.setdefault(name(entry), []).append(f"[{entry['schedule']}]{'*' if entry['default'] else ''} {us:.2f}")
    for key, row in cells.items():
        print(f"  {key:28s} " + "  ".join(row))


# a GEMV schedule enters the table only where it beats the default by this much (run-to-run noise)
TABLE_MARGIN = 0.03


def write_table(path: Path, results: list) -> None:
    """The fastest schedule per (rows, width, outputs, words), as lanec/codegen/schedules.py reads
    it, merged into what `path` holds (copy it to lanec/codegen/schedules.json once tests/gpu has
    checked those specializations: their tuned cases): the batched set's q8_gemm_tc launches, or
    the GEMV set's q8_gemv and q8_gated_gemv (outputs: the pair's hidden width) where a schedule
    beats the default by TABLE_MARGIN."""
    table = json.loads(path.read_text()) if path.is_file() else {}
    best: dict[tuple, tuple] = {}
    defaults: dict[tuple, float] = {}
    for entry, us, _, _ in results:
        if entry["kind"] not in ("q8_tc", "q8"):
            continue
        kernel = "q8_gemm_tc" if entry["kind"] == "q8_tc" else "q8_gated_gemv" if entry.get("gated") else "q8_gemv"
        key = (kernel, f"outputs={entry['n']},rows={entry['rows']},width={entry['k']},words={entry['words']}")
        if entry.get("default"):
            defaults[key] = us
        if key not in best or us < best[key][0]:
            best[key] = (us, entry["knobs"])
    written = 0
    for (kernel, key), (us, knobs) in best.items():
        if kernel != "q8_gemm_tc" and us > (1 - TABLE_MARGIN) * defaults[(kernel, key)]:
            continue
        table.setdefault(kernel, {})[key] = {"schedule": knobs, "us": round(us, 2)}
        written += 1
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote the fastest schedules of {written} shapes to {path}")


if __name__ == "__main__":
    measure.main(build, run, "q8.py", write_table)
