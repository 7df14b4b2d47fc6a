"""Tuned schedules: the specialization knobs measured best on the GPU for a kernel at a shape,
kept in schedules.json beside this file and read by the lowering. The benches write it on the H200
(`bench/kda.py --write-table`, `bench/gemv.py --write-table`; `tests/gpu/session.sh` runs both);
an entry joins the table once tests/gpu has checked its specialization (the GPU cases of gemv and
gated_gemv include every schedule the table names). A shape not in the table keeps the kernel's
own defaults (the seed's, for KdaSplit)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("schedules.json")


@cache
def table() -> dict:
    if not TABLE.exists():
        return {}
    return json.loads(TABLE.read_text())


def key(shape: dict) -> str:
    return ",".join(f"{k}={shape[k]}" for k in sorted(shape))


def schedule_for(kernel: str, shape: dict) -> dict:
    """The spec overrides for `kernel` at `shape` (e.g. {"schedule": [early, lanes, ...],
    "gate_mode": 1}), or {} where the table has none."""
    entry = table().get(kernel, {}).get(key(shape), {})
    return {k: tuple(v) if isinstance(v, list) else v for k, v in entry.items() if k != "us"}


def measured_us(kernel: str, shape: dict) -> float | None:
    """The time the bench measured for the table's entry of `kernel` at `shape` (None: no entry)."""
    entry = table().get(kernel, {}).get(key(shape))
    return None if entry is None else entry.get("us")
