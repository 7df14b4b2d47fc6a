"""Tuned schedules: the specialization knobs measured best on the GPU for a kernel at a shape,
kept in schedules.json beside this file and read by the lowering. The benches write it on the H200
(`bench/kda.py --write-table`, `bench/gemv.py --write-table`, `bench/gemm.py --write-table`,
`bench/q8.py --write-table` for q8_gemv and q8_gated_gemv, with LANEC_Q8_SET=tc for q8_gemm_tc;
`tests/gpu/session.sh` runs them); an entry joins the table once tests/gpu has checked its
specialization (each kernel's GPU cases include every schedule the table names: `tuned_cases`).

An entry names its knobs by field: {"schedule": {"early": 2, "lanes": 32, "occupancy": 5},
"us": 42.31}. The fields are those of the kernel's schedule dataclass (facts.py: `KdaSchedule`
for kda_split, `RowSchedule` for gemv and gated_gemv); a field the entry leaves out keeps the
kernel's default for the shape (`KdaSchedule.for_shape`; the row products' own choice), and a
shape not in the table keeps them all. mixture_gated's and mixture_down's entries (`MixtureSchedule`) come from whole
steps (bench/model.py's lanec side, each units a plan), not from a bench of the launch alone: they
carry no "us"."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from lanec.codegen.facts import AttentionSchedule, GemmSchedule, KdaSchedule, MixtureSchedule, RowSchedule

TABLE = Path(__file__).with_name("schedules.json")
SCHEDULES = {"kda_split": KdaSchedule, "gemv": RowSchedule, "gated_gemv": RowSchedule, "gemm_tc": GemmSchedule,
             "q8_gemm_tc": GemmSchedule, "q8_gemv": RowSchedule, "q8_gated_gemv": RowSchedule,
             "mixture_gated": MixtureSchedule, "mixture_down": MixtureSchedule, "latent_attention": AttentionSchedule}


@cache
def table() -> dict:
    if not TABLE.exists():
        return {}
    return json.loads(TABLE.read_text())


def key(shape: dict) -> str:
    return ",".join(f"{k}={shape[k]}" for k in sorted(shape))


def shape_of(entry_key: str) -> dict[str, int]:
    """A table key (`key`) back to its shape, the fields as integers."""
    return {k: int(v) for k, v in (item.split("=") for item in entry_key.split(","))}


def tuned_shapes(kernel: str) -> list[tuple[dict, dict]]:
    """Every (shape, schedule) the table holds for `kernel`, the shape's fields as integers: what
    the GPU tests check for each kernel (their `tuned_` cases)."""
    return [(shape_of(shape), entry["schedule"]) for shape, entry in table().get(kernel, {}).items()]


def tuned_cases(kernel: str, outputs: str = "parts") -> dict[str, dict]:
    """The GPU cases of `kernel`'s table entries (`tuned_shapes`), by name (tuned_r{rows}_k{width}
    _n{outputs}, and _w{words} where the shape has words, _gated for a gated pair's launch): the
    shape as the kernel's arguments, `outputs` the argument that takes the outputs ("parts": one
    part; "hidden": a gated pair's), with the entry's schedule."""
    cases = {}
    for shape, schedule in tuned_shapes(kernel):
        extra = {"words": shape["words"]} if "words" in shape else {}
        name = "tuned_r{rows}_k{width}_n{outputs}".format(**shape) + (f"_w{extra['words']}" if extra else "")
        if shape.get("gated"):
            extra, name = {**extra, "gated": True}, name + "_gated"
        taken = [shape["outputs"]] if outputs == "parts" else shape["outputs"]
        cases[name] = {"rows": shape["rows"], "width": shape["width"], outputs: taken, **extra, "schedule": schedule}
    return cases


def schedule_for(kernel: str, shape: dict) -> dict:
    """The spec overrides for `kernel` at `shape` as the table writes them (e.g. {"schedule":
    {"early": 1}}), or {} where the table has none. A knob the kernel's schedule does not have is
    a ValueError naming it."""
    entry = table().get(kernel, {}).get(key(shape), {})
    overrides = {k: v for k, v in entry.items() if k != "us"}
    if "schedule" in overrides and kernel in SCHEDULES:
        SCHEDULES[kernel].of(overrides["schedule"])  # checked here: the table's error, not the kernel's
    return overrides


def kda_schedule(heads: int, batch: int, overrides: dict) -> KdaSchedule:
    """KdaSplit's whole schedule at `heads` x `batch`: the shape's defaults, with the knobs the
    table's `overrides` (`schedule_for`'s) name."""
    return KdaSchedule.for_shape(heads, batch, overrides.get("schedule"))


def measured_us(kernel: str, shape: dict) -> float | None:
    """The time the bench measured for the table's entry of `kernel` at `shape` (None: no entry)."""
    entry = table().get(kernel, {}).get(key(shape))
    return None if entry is None else entry.get("us")
