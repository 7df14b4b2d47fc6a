"""bf16 GEMV and gated GEMV against torch (cuBLAS) and the device-to-device copy bandwidth, at Kimi
Linear's product shapes, measured in the same run. Two steps:

    python bench/gemv.py build      # CPU machine: compile the specializations into build/bench/gemv/
    PYTHONPATH=. python3 bench/gemv.py   # GPU machine (torch for the anchor): the table

The short products (`SHORT`: K <= 512, some read per head) are timed at 1 and 8 rows with schedules of
fewer warps and more rows a CTA; their anchor is cuBLAS's batched product over the heads.
`LANEC_GEMV_SET=short python bench/gemv.py build` builds only them (the GPU step times what was built).
`LANEC_GEMV_SET=floor` builds one row against 2304-wide weights of 1024 to 163840 outputs at the
default schedule (`FLOOR`), and the GPU step fits each side's time to t = floor + bytes / rate: the
floor is what a launch costs in a chain of PDL launches beyond its bytes, and the % of the copy
bandwidth a product of a given size can reach follows from it (`floor_fit`).

Method: clocks warmed by copies first; each product's weights rotate over enough copies to pass
240 MB (4x the 60 MB L2), so every launch reads its weights from HBM; a CUDA graph holds one launch
per copy (ours with PDL, as a decode step runs them; torch's matmul into the same output), and a
launch's time is the median graph replay over the copies. TB/s counts weight bytes only; `copy` is
torch's 1 GiB device-to-device copy, read + write counted. `vs torch` > 1: ours is faster. The
gated rows compare against one cuBLAS GEMV over gate and up concatenated (without its SwiGLU)."""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from pathlib import Path

import measure  # bench/measure.py: this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench" / "gemv"

PRODUCTS = [  # (label, K, parts)
    ("q proj", 2304, [4096]),
    ("qkv", 2304, [4096, 4096, 4096]),
    ("o proj", 4096, [2304]),
    ("dense gate+up", 2304, [18432]),
    ("dense down", 9216, [2304]),
    ("lm head", 2304, [163840]),
    ("expert gate+up", 2304, [2048]),
]
# Short products (K <= 512), where the default's 8 warps leave most threads without a vector (K = 128: 16
# vectors for 256 threads): the KDA output gate's g_b, and an absorbed latent attention's per-head query
# absorption and value expansion (Kimi Linear's 32 heads, DeepSeek-V3's 128). A real-size batch-1 profile
# (H200, 2026-11-30) put Kimi Linear's absorption at 13.97 us for its 4.2 MB (7% of the copy bandwidth).
# (label, K, parts, per_head: heads, unit, offset of the part each head reads)
SHORT = [
    ("kda g_b", 128, [4096], None),
    ("kimi mla absorb", 128, [32 * 512], (32, 192, 0)),
    ("kimi mla expand", 512, [32 * 128], (32, 512, 0)),
    ("deepseek mla absorb", 128, [128 * 512], (128, 192, 0)),
    ("deepseek mla expand", 512, [128 * 128], (128, 512, 0)),
]
SHORT_ROWS = [1, 8]
# The launch floor: one row, K = 2304 (Kimi Linear's hidden width), outputs from 1024 (4.7 MB) to the lm
# head's 163840 (755 MB), the default schedule; label "floor" marks them for the fit
FLOOR = [("floor", 2304, [n]) for n in (1024, 2048, 4096, 8192, 12288, 16384, 32768, 65536, 163840)]
PAIRS = [("dense pair swiglu", 2304, 9216), ("expert pair swiglu", 2304, 1024)]  # (label, K, hidden)
ROWS = [1, 8, 32]


def knobs(tensor_cores: bool, warps=None, rows_per_cta=None) -> dict:
    """A `RowSchedule`'s knobs (lanec/codegen/facts.py): a knob left out is the kernel's choice."""
    return {"warps": warps, "rows_per_cta": rows_per_cta, "tensor_cores": tensor_cores} if warps else (
        {"rows_per_cta": rows_per_cta, "tensor_cores": tensor_cores})


# Alternative schedules timed beside the defaults, to tune them.
SCHEDULES = {
    1: [knobs(False, 4, 2), knobs(False, 9, 2), knobs(False, 8, 1), knobs(False, 8, 4), knobs(True, None, 8),
        knobs(True, None, 16), knobs(False, 9, 4), knobs(False, 16, 2), knobs(False, 16, 1)],
    8: [knobs(True, None, 8), knobs(True, None, 16), knobs(True, 4, 8), knobs(False, 8, 2)],
    32: [knobs(True, None, 8), knobs(True, None, 16), knobs(True, 4, 16), knobs(True, None, 32)],
}
# for the short products: fewer warps (each still a vector a lane of the row), more rows a CTA
SHORT_SCHEDULES = {
    1: [knobs(False, 1, 4), knobs(False, 1, 8), knobs(False, 1, 16), knobs(False, 2, 4), knobs(False, 2, 8),
        knobs(False, 4, 2), knobs(False, 4, 8)],
    8: [knobs(False, 1, 2), knobs(False, 1, 4), knobs(False, 2, 2), knobs(False, 2, 4), knobs(True, None, 8),
        knobs(True, 1, 16), knobs(True, 2, 16)],
}
ROTATE_BYTES = 240 * 2**20


def build() -> None:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.gated_gemv import GatedGemv
    from lanec.codegen.kernels.gemv import Gemv

    entries = []

    def add(kernel, stem, **info):
        compiled = compile_kernel(kernel)
        compiled.save(OUT, stem)
        entries.append({"stem": stem, "warps": kernel.warps, "per_cta": kernel.rows_per_cta,
                        "path": "mma" if kernel.tensor_cores else "fma", "x_width": kernel.x_width, **info})
        print(f"{stem:40s} grid {compiled.launch.grid[0]:6d} x {compiled.launch.block[0]}")

    def variants(make, label, kind, k, n, slug, rows_set=ROWS, schedules=SCHEDULES, per_head=None):
        for rows in rows_set:
            default = make(rows, None)
            add(default, f"{slug}_r{rows}", label=label, kind=kind, k=k, n=n, rows=rows, default=True,
                per_head=per_head)
            for schedule in schedules[rows]:
                try:
                    kernel = make(rows, schedule)
                except ValueError:
                    continue
                same = all(getattr(kernel, a) == getattr(default, a)
                           for a in ("warps", "rows_per_cta", "tensor_cores"))
                if not same:
                    knobs = "-".join(f"{key}{int(value)}" for key, value in schedule.items())
                    add(kernel, f"{slug}_r{rows}_{knobs}", label=label, kind=kind, k=k, n=n, rows=rows,
                        default=False, per_head=per_head)

    if os.environ.get("LANEC_GEMV_SET") == "floor":
        for label, k, parts in FLOOR:
            variants(lambda rows, schedule, k=k, parts=parts: Gemv(rows, k, parts, schedule=schedule),
                     label, "gemv", k, sum(parts), f"floor_n{sum(parts)}", [1], {1: []})
        (OUT / "manifest.json").write_text(json.dumps(entries, indent=1) + "\n")
        print(f"{len(entries)} kernels in {OUT.relative_to(ROOT)}")
        return
    short_only = os.environ.get("LANEC_GEMV_SET") == "short"
    for label, k, parts in [] if short_only else PRODUCTS:
        variants(lambda rows, schedule, k=k, parts=parts: Gemv(rows, k, parts, schedule=schedule),
                 label, "gemv", k, sum(parts), label.replace(" ", "_").replace("+", ""))
    for label, k, parts, per_head in SHORT:
        variants(lambda rows, schedule, k=k, parts=parts, per_head=per_head: Gemv(
            rows, k, parts, per_head=per_head, schedule=schedule), label, "gemv", k, sum(parts),
            label.replace(" ", "_").replace("+", ""), SHORT_ROWS, SHORT_SCHEDULES, per_head=per_head)
    for label, k, hidden in [] if short_only else PAIRS:
        variants(lambda rows, schedule, k=k, hidden=hidden: GatedGemv(rows, k, hidden, schedule=schedule),
                 label, "gated_gemv", k, 2 * hidden, label.replace(" ", "_"))
    (OUT / "manifest.json").write_text(json.dumps(entries, indent=1) + "\n")
    print(f"{len(entries)} kernels in {OUT.relative_to(ROOT)}")


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
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        with torch.cuda.stream(torch_stream):
            for i in range(repeats + 3):
                start.record()
                fn()
                end.record()
                end.synchronize()
                if i >= 3:
                    times.append(start.elapsed_time(end) * 1000.0)
        return statistics.median(times)

    # warm the clocks (the card idles at 345 MHz), then the copy ceiling
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    with torch.cuda.stream(torch_stream):
        for _ in range(200):
            dst.copy_(src)
    copy_us = torch_time(lambda: dst.copy_(src), repeats=20)
    copy_tbs = 2 * src.numel() / copy_us / 1e6
    src = dst = None  # free the 2 GiB
    print(f"{device.name}: device-to-device copy {copy_tbs:.2f} TB/s (1 GiB, read + write)")

    rows_out, weights_cache = [], {}
    for entry in entries:
        k, n, rows = entry["k"], entry["n"], entry["rows"]
        weight_bytes = n * k * 2
        copies = max(1, math.ceil(ROTATE_BYTES / weight_bytes))
        key = (k, n)
        if key not in weights_cache:
            weights_cache.clear()
            torch.cuda.empty_cache()
            weights_cache[key] = torch.empty(copies, n, k, dtype=torch.bfloat16, device="cuda").normal_()
        weights = weights_cache[key]
        x = torch.randn(rows, entry.get("x_width", k), dtype=torch.bfloat16, device="cuda")
        y = torch.empty(rows, n if entry["kind"] == "gemv" else n // 2, dtype=torch.bfloat16, device="cuda")
        torch.cuda.synchronize()
        artifact = load_artifact(OUT, entry["stem"])
        function = driver.Module(artifact.cubin).function(artifact.entry, artifact.launch)
        if entry["kind"] == "gemv":
            pointers = [[x.data_ptr(), weights[i].data_ptr(), y.data_ptr()] for i in range(copies)]
        else:  # gate = the first hidden rows of a copy, up = the rest
            half = n // 2
            pointers = [[x.data_ptr(), weights[i].data_ptr(), weights[i][half:].data_ptr(), y.data_ptr()]
                        for i in range(copies)]
        launches = [driver.Launch(function, artifact.launch, p, ours_stream) for p in pointers]
        graph = driver.Graph.capture(ours_stream, lambda launches=launches: [launch.enqueue() for launch in launches])
        for _ in range(3):
            graph.replay(ours_stream)
        ours_us = driver.time_us(ours_stream, lambda graph=graph: graph.replay(ours_stream), repeats=25) / copies
        graph.destroy()
        torch_us = None
        if entry["default"]:
            per_head = entry.get("per_head")
            if per_head:  # each head's part of x by its own rows: one batched product (cuBLAS), heads the batch
                heads, unit, offset = per_head
                xs = x.view(rows, heads, unit)[:, :, offset:offset + k].transpose(0, 1)
                out = torch.empty(heads, rows, n // heads, dtype=torch.bfloat16, device="cuda")

                def product(i, xs=xs, out=out, heads=heads, weights=weights, k=k):
                    torch.bmm(xs, weights[i].view(heads, -1, k).transpose(1, 2), out=out)
            else:
                out = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda")

                def product(i, out=out, x=x, weights=weights):
                    torch.matmul(x, weights[i].t(), out=out)
            with torch.cuda.stream(torch_stream):
                for i in range(copies):  # warm cuBLAS's choice outside the capture
                    product(i)
                torch_stream.synchronize()
                torch_graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(torch_graph, stream=torch_stream):
                    for i in range(copies):
                        product(i)
            torch_us = torch_time(torch_graph.replay) / copies
            del torch_graph
        tbs = weight_bytes / ours_us / 1e6
        rows_out.append((entry, ours_us, tbs, torch_us, copies))
        print(f"  {entry['stem']:40s} {ours_us:8.2f} us {tbs:5.2f} TB/s"
              + (f"  torch {torch_us:8.2f} us" if torch_us else ""), flush=True)

    print()
    print(f"GPU: {device.name}; copy ceiling {copy_tbs:.2f} TB/s")
    print("| product | K -> N | rows | weights MB | schedule | ours us | TB/s | % of copy | torch us "
          "| vs torch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for entry, ours_us, tbs, torch_us, _ in rows_out:
        if not entry["default"]:
            continue
        megabytes = entry["n"] * entry["k"] * 2 / 1e6
        print(f"| {entry['label']} | {entry['k']} -> {entry['n']} | {entry['rows']} | {megabytes:.1f} "
              f"| {entry['path']} {entry['warps']}w x {entry['per_cta']}r | {ours_us:.2f} | {tbs:.2f} "
              f"| {100 * tbs / copy_tbs:.0f}% "
              f"| {torch_us:.2f} | {torch_us / ours_us:.2f} |")
    print()
    print("schedules (path warps x weight rows a CTA; * = default): us")
    by_label: dict[str, list] = {}
    for entry, ours_us, _, _, _ in rows_out:
        tag = f"{entry['path']} {entry['warps']}x{entry['per_cta']}" + ("*" if entry["default"] else "")
        key = f"{entry['label']} ({entry['kind']}) r{entry['rows']}"
        by_label.setdefault(key, []).append(f"{tag} {ours_us:.2f}")
    for label, cells in by_label.items():
        print(f"  {label:36s} " + "  ".join(cells))
    floor = [(e["n"] * e["k"] * 2, us, torch_us) for e, us, _, torch_us, _ in rows_out if e["label"] == "floor"]
    if floor:
        print()
        print(floor_table(floor, copy_tbs))
    return rows_out


def floor_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares of t = floor + bytes / rate over (bytes, us) points: (floor us, rate TB/s)."""
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    slope = sum((b - mean_b) * (t - mean_t) for b, t in points) / sum((b - mean_b) ** 2 for b, _ in points)
    return mean_t - slope * mean_b, 1e-6 / slope


def floor_table(floor: list[tuple[float, float, float]], copy_tbs: float) -> str:
    """The launch floor of ours and of torch's (bytes, ours us, torch us) rows: each side's fit, each
    point's time against it, and the share of the copy bandwidth the fit allows a product of 10-100 MB."""
    lines = ["| weights MB | ours us | ours fit us | torch us | torch fit us |", "|---|---|---|---|---|"]
    ours_floor, ours_rate = floor_fit([(b, us) for b, us, _ in floor])
    torch_floor, torch_rate = floor_fit([(b, t) for b, _, t in floor])
    for b, us, t in floor:
        lines.append(f"| {b / 1e6:.1f} | {us:.2f} | {ours_floor + b / ours_rate / 1e6:.2f} | {t:.2f} "
                     f"| {torch_floor + b / torch_rate / 1e6:.2f} |")
    lines.append("")
    lines.append(floor_line("ours", ours_floor, ours_rate, copy_tbs))
    lines.append(floor_line("torch", torch_floor, torch_rate, copy_tbs))
    return "\n".join(lines)


def floor_line(name: str, floor: float, rate: float, copy_tbs: float) -> str:
    """One side's fit in words, with the share of the copy bandwidth it allows a product of 10 to 100 MB
    (MB / TB/s is microseconds)."""
    reach = "  ".join(f"{mb} MB {100 * (mb / copy_tbs) / (floor + mb / rate):.0f}%" for mb in (10, 20, 30, 60, 100))
    return (f"{name}: a launch costs {floor:.2f} us + its bytes at {rate:.2f} TB/s ({100 * rate / copy_tbs:.0f}% "
            f"of copy); % of copy reached: {reach}")


# a schedule enters the table only where it beats the default by this much (run-to-run noise)
TABLE_MARGIN = 0.03


def write_table(path: Path, rows_out) -> None:
    """The autotuner's output: per (kernel, rows, width, outputs) the fastest schedule timed, where
    it beats the kernel's default by TABLE_MARGIN, in the format lanec/codegen/schedules.py reads
    (merged into what `path` already holds; copy it to lanec/codegen/schedules.json once the GPU
    cases have checked the entries: their `tuned_` cases)."""
    table = json.loads(path.read_text()) if path.is_file() else {}
    best: dict[tuple, tuple] = {}
    defaults: dict[tuple, float] = {}
    for entry, ours_us, _, _, _ in rows_out:
        key = (entry["kind"], entry["rows"], entry["k"], entry["n"])
        if entry["default"]:
            defaults[key] = ours_us
        if key not in best or ours_us < best[key][1]:
            best[key] = (entry, ours_us)
    best = {key: value for key, value in best.items() if value[1] <= (1 - TABLE_MARGIN) * defaults[key]}
    for (kind, rows, k, n), (entry, us) in sorted(best.items()):
        # the whole RowSchedule the fastest kernel ran, by field; a gated pair's outputs are its hidden units
        schedule = {"warps": entry["warps"], "rows_per_cta": entry["per_cta"], "tensor_cores": entry["path"] == "mma"}
        outputs = n // 2 if kind == "gated_gemv" else n
        table.setdefault(kind, {})[f"outputs={outputs},rows={rows},width={k}"] = {"schedule": schedule,
                                                                                  "us": round(us, 2)}
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote the fastest schedules of {len(best)} products to {path}")


if __name__ == "__main__":
    measure.main(build, run, "gemv.py", write_table)
