"""A plan compiled with some of the schedule table's entries replaced, for a step A/B of schedules that won
alone but may lose in the step (tests/gpu/session.sh occ-split):

    python tests/gpu/variant_plan.py [--add] [--fold-norms ...] FORM.mlir OUT.plan KERNEL 'SHAPE KEY' '{"knob": value, ...}' [...]

e.g. gemm_tc 'outputs=2304,rows=64,width=4096' '{"engine": "wgmma", "splits": 3, "stages": 7, "tile_n": 64,
"occupancy": 2}', or a whole entry: latent_attention 'batch=1,context=1024,heads=32,lora=512,rope=64,tokens=1'
'{"schedule": {"block_rows": 8}, "splits": 16}'. With --add first, a shape the table has no entry for gets one (without it, such a key is refused: a typo would
otherwise compile the table's own plan). Other options before the form (`--fold-norms`, ...) go to `lanec compile`. The replaced entries must be specializations the
GPU tests have checked (each kernel's tuned cases) before a table keeps them; the plan is compiled in this process,
from the table with those entries in place."""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> None:
    add = argv[:1] == ["--add"]  # a shape the table lacks gets an entry (else a mistyped key is refused)
    argv = argv[1:] if add else argv
    options = []  # lanec compile's own options, before the form
    while argv and argv[0].startswith("--"):
        options.append(argv.pop(0))
    if len(argv) < 5 or (len(argv) - 2) % 3:
        sys.exit(__doc__)
    from lanec.cli import main as lanec
    from lanec.codegen import schedules

    form, plan, rest = argv[0], argv[1], argv[2:]
    table = schedules.table()  # cached: the lowering reads this dict
    for kernel, key, schedule in zip(rest[::3], rest[1::3], rest[2::3], strict=True):
        if key not in table.get(kernel, {}) and not add:
            sys.exit(f"variant_plan: the table has no {kernel} entry {key!r} to replace")
        knobs = json.loads(schedule)  # the schedule, or a whole entry ({"schedule": ..., "splits": ...})
        table.setdefault(kernel, {})[key] = {**(knobs if "schedule" in knobs else {"schedule": knobs}), "us": 0.0}
    lanec(["compile", form, "-o", plan, *options], standalone_mode=False)


if __name__ == "__main__":
    main(sys.argv[1:])
