"""Nsight Compute profiles of our kernels at the shapes the open targets are about, one launch each, and
what their counters say. Three steps:

    python bench/ncu.py build              # CPU machine: compile the profiled kernels into build/ncu/
                                           # (`build --plan PLAN KIND...`: a plan's own kernels of those kinds)
    bash tests/gpu/session.sh ncu          # GPU machine (carry build/ncu): `ncu --set full` of each kernel's
                                           # second launch; its details and SASS pages as CSV in $OUT/logs.tgz
    python bench/ncu.py summarize DIR      # here: from DIR's CSVs, each kernel's speed-of-light line, its
                                           # stall reasons and its executed instructions by opcode

`python3 bench/ncu.py NAME` (what ncu runs) launches NAME twice, eagerly, on fresh tensors built from its
params (`fills`): random values, except the positions (each request's last row at the longest context the
page table holds), a shuffled page table, zeroed stream-K flags, and the tensor maps encoded over their
tensors as the runtime encodes them. `python3 bench/ncu.py list` names the built kernels.

The kernels: the wgmma latent attention at Kimi Linear's 32k keys (batch 8 in 16 chunks, batch 1 in 128)
and its combine, GQA 32/8 x 128 at 32k keys (batch 1) and its combine, and gemm_tc on Kimi Linear's
merged q/k/v at 256 rows with the schedule table's entry. Measured with this (bench/RESULTS.md,
2026-12-01): a latent warp-tile is about 1330 SASS instructions at 3.35 cycles each."""

from __future__ import annotations

import csv
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "ncu"
CONTEXT, PAGE = 32768, 16


def kernels() -> dict:
    """name -> the kernel object to compile (CuTe DSL: the CPU machine only)."""
    from lanec.codegen.kernels.attention import Attention, AttentionCombine, LatentAttention
    from lanec.codegen.kernels.gemm_tc import GemmTc
    from lanec.codegen.schedules import schedule_for
    from lanec.shim import attention_splits

    pages = CONTEXT // PAGE

    def latent(batch, splits):
        return LatentAttention(batch, 1, 32, 512, 0, PAGE, pages, batch * pages, splits=splits, nope=128)

    gqa_splits = attention_splits(1, 32, 8, CONTEXT)
    qkv = {"rows": 256, "width": 2304, "outputs": 3 * 4096}  # the schedule table's key
    return {
        "latent-b8-s16": latent(8, 16),
        "latent-b1-s128": latent(1, 128),
        "combine-latent-s128": AttentionCombine(rows=1, heads=32, head=512, splits=128),
        f"gqa-b1-s{gqa_splits}": Attention(1, 1, 32, 8, 128, PAGE, pages, pages, splits=gqa_splits),
        f"combine-gqa-s{gqa_splits}": AttentionCombine(rows=1, heads=32, head=128, splits=gqa_splits),
        "gemm-kimi-qkv-r256": GemmTc(256, 2304, [4096, 4096, 4096],
                                     schedule=schedule_for("gemm_tc", qkv).get("schedule")),
    }


def plan_kernels(launches, kinds: list[str], stem: str) -> dict:
    """name -> kernel object: the first of a compiled plan's `launches` of each of `kinds` (e.g. mixture_router),
    rebuilt from its recorded spec by `make_kernel`, named `<stem>-<kind>`."""
    from lanec.codegen.kernels import make_kernel
    from lanec.runtime.profile import kernel_of

    out = {}
    for kind in kinds:
        launch = next((launch for launch in launches if kernel_of(launch.name) == kind), None)
        if launch is None:
            sys.exit(f"ncu: {stem} has no {kind} launch")
        out[f"{stem}-{kind}"] = make_kernel(kind, launch.spec)
    return out


def build(argv: list[str]) -> None:
    """`build`: the kernels above; `build --plan PLAN KIND...`: a plan's kernels of those kinds instead."""
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel

    built = kernels()
    if argv[:1] == ["--plan"] and len(argv) > 2:
        from lanec.runtime.plan import Plan

        path = Path(argv[1])
        built = plan_kernels(Plan.read(path).launches, argv[2:], path.stem)
    for name, kernel in built.items():
        compile_kernel(kernel).save(OUT, name)
        print(f"built {name}  grid {kernel.launch().grid} block {kernel.launch().block[0]}", flush=True)


def names() -> list[str]:
    return sorted(path.stem for path in OUT.glob("*.json"))


def fills(params) -> dict[str, tuple[str, int, str, int]]:
    """How `launch` fills each tensor param (`TensorParam`s; tensor maps left out): name -> (kind, elements,
    dtype, value). Kinds: "pages" (a shuffled page table over every page the cache holds), "positions"
    (each request's rows at the longest context its page table holds: value), "slots" (a linear layer's state
    slots, 1.. in row order: slot 0 is padding), "random" (floating point),
    "zeros" (integer: stream-K's flags and other counters start lowered)."""
    by_name = {p.name: p for p in params}
    cache = next((p for p in params if p.name.endswith("cache")), None)
    out = {}
    for param in params:
        if param.tensor_map is not None:
            continue
        span = 1 + sum((n - 1) * s for n, s in zip(param.shape, param.element_strides, strict=True))
        if param.name == "pages":
            out[param.name] = ("pages", span, param.dtype, cache.shape[0])
        elif param.name == "positions":
            out[param.name] = ("positions", span, param.dtype, by_name["pages"].shape[1] * cache.shape[1] - 1)
        elif param.name == "slots":  # a linear layer's state slots: 1.. (slot 0 and below are padding rows)
            out[param.name] = ("slots", span, param.dtype, 0)
        elif param.dtype in ("bfloat16", "float16", "float32"):
            out[param.name] = ("random", span, param.dtype, 0)
        else:
            out[param.name] = ("zeros", span, param.dtype, 0)
    return out


def launch(name: str) -> None:
    """Two eager launches of `name` on tensors built from its params (`fills`)."""
    sys.path.insert(0, str(ROOT))
    import torch

    from lanec.runtime import driver
    from lanec.runtime.artifact import load_artifact

    driver.Device(0)
    torch.cuda.init()
    art = load_artifact(OUT, name)
    dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32, "int32": torch.int32,
              "int8": torch.int8, "uint8": torch.uint8}
    held = {}
    for param, (kind, span, dtype, value) in fills(art.params).items():
        if kind == "pages":  # the first `span` of the cache's pages, shuffled
            held[param] = torch.randperm(value, device="cuda")[:span].to(torch.int32)
        elif kind == "positions":
            held[param] = torch.full((span,), value, device="cuda", dtype=torch.int32)
        elif kind == "slots":
            held[param] = torch.arange(1, span + 1, device="cuda", dtype=torch.int32)
        elif kind == "random":
            held[param] = torch.randn(span, device="cuda").to(dtypes[dtype])
        else:
            held[param] = torch.zeros(span, device="cuda", dtype=dtypes[dtype])
    maps = driver.TensorMaps(sum(p.tensor_map is not None for p in art.params))
    pointers = maps.pointers(art.params, {n: t.data_ptr() for n, t in held.items()})
    maps.upload()
    stream = driver.Stream()
    function = driver.Module(art.cubin).function(art.entry, art.launch)
    for _ in range(2):
        driver.launch(function, art.launch, pointers, stream)
    stream.synchronize()
    maps.free()
    print(f"launched {name} twice", flush=True)


SOL = ("Duration", "DRAM Throughput", "Issue Slots Busy", "Warp Cycles Per Issued Instruction",
       "Executed Instructions", "L2 Hit Rate", "Registers Per Thread")


def details(path: Path) -> dict[str, str]:
    """The speed-of-light metrics (SOL) of an ncu `--page details --csv` export, each value with its unit."""
    with path.open(newline="") as handle:
        return {row["Metric Name"]: f"{row['Metric Value']} {row.get('Metric Unit', '')}".strip()
                for row in csv.DictReader(handle) if row.get("Metric Name") in SOL}


def sass(path: Path) -> tuple[Counter, Counter, int]:
    """(executed warp instructions by opcode, stall samples by reason, all samples) of an ncu `--page
    source --csv --print-source sass` export (its first line names the kernel)."""
    with path.open(newline="") as handle:
        handle.readline()
        rows = list(csv.DictReader(handle))
    executed, stalls, samples = Counter(), Counter(), 0
    reasons = [c for c in (rows[0] if rows else {}) if c.startswith("stall_") and "Not Issued" not in c]
    for row in rows:
        words = row["Source"].split()
        if words:
            opcode = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
            executed[opcode.split(".")[0]] += int(row["Instructions Executed"] or 0)
        samples += int(row["Warp Stall Sampling (All Samples)"] or 0)
        for reason in reasons:
            stalls[reason[len("stall_"):]] += int(row[reason] or 0)
    return executed, stalls, samples


def summarize(folder: Path) -> str:
    """A markdown table of each profiled kernel in `folder` (NAME.details.csv, NAME.sass.csv), then its
    top stall reasons and opcodes."""
    lines = ["| kernel | " + " | ".join(SOL) + " |", "|---" * (len(SOL) + 1) + "|"]
    notes = []
    for path in sorted(folder.glob("*.details.csv")):
        name = path.name[:-len(".details.csv")]
        metrics = details(path)
        lines.append(f"| {name} | " + " | ".join(metrics.get(key, "") for key in SOL) + " |")
        source = folder / f"{name}.sass.csv"
        if source.is_file():
            executed, stalls, samples = sass(source)
            total = sum(executed.values()) or 1
            notes.append(f"- {name}: stalls " + ", ".join(f"{r} {100 * n / max(samples, 1):.0f}%"
                                                           for r, n in stalls.most_common(6))
                         + "; instructions " + ", ".join(f"{o} {100 * n / total:.0f}%"
                                                         for o, n in executed.most_common(8)))
    return "\n".join(lines + [""] + notes)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["build"]:
        build(args[1:])
    elif args == ["list"]:
        print("\n".join(names()))
    elif len(args) == 2 and args[0] == "summarize":
        print(summarize(Path(args[1])))
    elif len(args) == 1 and args[0] in names():
        launch(args[0])
    else:
        sys.exit("usage: python bench/ncu.py build [--plan PLAN KIND...] | list | summarize DIR | NAME (one of: "
                 + ", ".join(names() or ["nothing built yet"]) + ")")


if __name__ == "__main__":
    main()
