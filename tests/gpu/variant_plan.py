"""A plan compiled with some of the schedule table's entries replaced, for a step A/B of schedules that won
alone but may lose in the step (tests/gpu/session.sh occ-split):

    python tests/gpu/variant_plan.py [--add] [--fold-norms ...] FORM.mlir OUT.plan KERNEL 'SHAPE KEY' '{"knob": value, ...}' [...]

e.g. gemm_tc 'outputs=2304,rows=64,width=4096' '{"engine": "wgmma", "splits": 3, "stages": 7, "tile_n": 64,
"occupancy": 2}', or a whole entry: latent_attention 'batch=1,context=1024,heads=32,lora=512,rope=64,tokens=1'
'{"schedule": {"block_rows": 8}, "splits": 16}'. With --add first, a shape the table has no entry for gets one (without it, such a key is refused: a typo would
otherwise compile the table's own plan). Other options before the form (`--fold-norms`, ...) go to `lanec compile`. The replaced entries must be specializations the
GPU tests have checked (each kernel's tuned cases) before a table keeps them; the plan is compiled in this process,
from the table with those entries in place. `--fact NAME=VALUE` (a Python literal, before the form) sets one of
lanec/codegen/facts.py's facts for the compile, in every module that imported it (e.g.
`--fact MIXTURE_EARLY_SHARED_ROWS=None`); with facts, no schedule entry need be given."""

from __future__ import annotations

import ast
import json
import sys


def main(argv: list[str]) -> None:
    add = argv[:1] == ["--add"]  # a shape the table lacks gets an entry (else a mistyped key is refused)
    argv = argv[1:] if add else argv
    options, facts = [], {}  # lanec compile's own options, and facts set, before the form
    while argv and argv[0].startswith("--"):
        option = argv.pop(0)
        if option == "--fact" and argv:
            name, _, value = argv.pop(0).partition("=")
            facts[name] = ast.literal_eval(value)
        else:
            options.append(option)
    if len(argv) < 2 or (len(argv) - 2) % 3 or (len(argv) == 2 and not facts):
        sys.exit(__doc__)
    from lanec.cli import main as lanec
    from lanec.codegen import facts as fact_module
    from lanec.codegen import schedules

    for name, value in facts.items():
        if not hasattr(fact_module, name):
            sys.exit(f"variant_plan: facts.py has no {name}")
        for module in list(sys.modules.values()):
            if (getattr(module, "__name__", "") or "").startswith("lanec.") and hasattr(module, name):
                setattr(module, name, value)

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
