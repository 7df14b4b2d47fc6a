"""A plan compiled with some of the schedule table's entries replaced, for a step A/B of schedules that won
alone but may lose in the step (tests/gpu/session.sh occ-split):

    python tests/gpu/variant_plan.py FORM.mlir OUT.plan KERNEL 'SHAPE KEY' '{"knob": value, ...}' [...]

e.g. gemm_tc 'outputs=2304,rows=64,width=4096' '{"engine": "wgmma", "splits": 3, "stages": 7, "tile_n": 64,
"occupancy": 2}'. A shape the table has no entry for gets one. The replaced entries must be specializations the
GPU tests have checked (each kernel's tuned cases) before a table keeps them; the plan is compiled in this process,
from the table with those entries in place."""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> None:
    if len(argv) < 5 or (len(argv) - 2) % 3:
        sys.exit(__doc__)
    from lanec.cli import main as lanec
    from lanec.codegen import schedules

    form, plan, rest = argv[0], argv[1], argv[2:]
    table = schedules.table()  # cached: the lowering reads this dict
    for kernel, key, schedule in zip(rest[::3], rest[1::3], rest[2::3], strict=True):
        if key not in table.get(kernel, {}):
            print(f"variant_plan: adding {kernel} {key!r} (the table has no entry for it)")
        table.setdefault(kernel, {})[key] = {"schedule": json.loads(schedule), "us": 0.0}
    lanec(["compile", form, "-o", plan], standalone_mode=False)


if __name__ == "__main__":
    main(sys.argv[1:])
