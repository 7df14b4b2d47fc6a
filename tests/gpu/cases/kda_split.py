"""KdaSplit specializations for the GPU tests, compiled on the CPU machine into
build/gpu/kda_split/ (`<stem>.cubin` + `<stem>.json` each, and `cases.json` listing every stem
with its constructor arguments). Run here, then carry build/:

    python tests/gpu/cases/kda_split.py [--set quick|full|bench] [--jobs N]

A case's `schedule` names the knobs it sets over `KdaSchedule.for_shape`'s defaults (lanec/codegen/
codegen/facts.py), as the compiler's table does: {} is the shape's defaults.

The GPU side (tests/gpu/test_kda_split.py, bench/kda.py) imports only `CASES_FILE` and the
reading helpers, so it needs no CuTe DSL."""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "build" / "gpu" / "kda_split"
CASES_FILE = OUT / "cases.json"

HEADS = (4, 6, 8, 12, 16, 32)
BATCHES = (1, 2, 3, 17, 64, 256)
TOKENS = (1, 2, 3, 4, 8)


def case(heads, batch, tokens=1, gate_form="lower_bound", has_bias=False, gate_mode=0,
         schedule=None, x_pitch=None, slots=None, gate_rank=None, gate_pitch=None) -> dict:
    """`gate_rank` (and `gate_pitch`, its input's row pitch): the output gate's product folded."""
    return dict(heads=heads, batch=batch, tokens=tokens, gate_form=gate_form, has_bias=has_bias,
                gate_mode=gate_mode, schedule=dict(schedule or {}), x_pitch=x_pitch, slots=slots,
                gate_rank=gate_rank, gate_pitch=gate_pitch)


def schedule_label(knobs: dict) -> str:
    """A schedule's knobs as a name, by knob (`early2-lanes32-occupancy5`; `defaults`: none set)."""
    return "-".join(f"{k}{int(v)}" for k, v in sorted(knobs.items())) or "defaults"


def bench_slots(heads: int, batch: int) -> int:
    """State slots for bench/kda.py: enough slot tables (8 to 256) that the steps of one graph
    touch 256 MB of state together, so no step finds its state in the 60 MB L2."""
    step_bytes = batch * heads * 128 * 128 * 4
    sets = max(8, min(256, -(-(256 << 20) // step_bytes)))
    return batch * sets + 1


def stem(spec: dict) -> str:
    form = "sp" if spec["gate_form"] == "softplus" else "lb"
    sched = schedule_label(spec["schedule"])
    pitch = f"_p{spec['x_pitch']}" if spec.get("x_pitch") else ""
    slots = f"_n{spec['slots']}" if spec.get("slots") else ""
    gate = f"_g{spec['gate_rank']}" if spec.get("gate_rank") else ""
    gate += f"_gp{spec['gate_pitch']}" if spec.get("gate_pitch") else ""
    return (f"h{spec['heads']}_b{spec['batch']}_t{spec['tokens']}_{form}_bias{int(spec['has_bias'])}"
            f"_m{spec['gate_mode']}_s{sched}{pitch}{slots}{gate}")


def quick() -> list[dict]:
    """The default schedule first, then one case per feature."""
    return [
        case(4, 2),
        case(32, 1),
        case(8, 17, has_bias=True),
        case(6, 3, gate_form="softplus"),
        case(12, 64),  # fast math
        case(4, 2, tokens=2),
        case(8, 3, tokens=4, gate_form="softplus", has_bias=True),
        case(4, 17, tokens=8),
        case(8, 17, schedule={"early": 1}),
        case(8, 17, schedule={"early": 2}),
        case(8, 17, schedule={"early": 3, "cluster": 2}),
        case(8, 17, gate_mode=1),
        case(8, 17, gate_mode=2),
        case(8, 3, gate_mode=1, tokens=3),
        case(4, 2, schedule={"cluster": 16}),
        case(4, 2, schedule={"cluster": 2}),
        case(4, 17, x_pitch=3 * 4 * 128 + 64),
        case(8, 128, schedule={"early": 1, "occupancy": 5}),
        case(16, 256, tokens=2, gate_form="softplus", has_bias=True),
        # the output gate's product folded (fold-gate-product): Kimi Linear's batch 1 with g_a read in a
        # wider row, speculative tokens, staged state at five CTAs a SM, one CTA a head
        case(32, 1, gate_form="softplus", gate_rank=128, gate_pitch=264),
        case(32, 1, gate_form="softplus", gate_rank=128, gate_pitch=264, gate_mode=1),  # KDA_GATE_MODE's other order
        case(8, 3, tokens=4, gate_form="softplus", has_bias=True, gate_rank=128),
        case(8, 17, schedule={"early": 2}, gate_rank=128),
        case(8, 128, schedule={"early": 2, "lanes": 32, "occupancy": 5}, gate_rank=128),
        case(4, 2, tokens=3, schedule={"early": 1, "cluster": 1}, gate_rank=128),
        # in the gate warp: 8 tokens at 8 CTAs a head (each token's sigmoids to its own output CTA), after
        # the FMA-partial decays, at 8 rows a CTA; in the main threads at 64 rows a CTA
        case(4, 1, tokens=8, gate_rank=128),
        case(8, 17, gate_mode=2, gate_rank=128),
        case(4, 2, schedule={"cluster": 16}, gate_rank=128),
        case(4, 2, schedule={"cluster": 2}, gate_rank=128),
    ]


def tuned() -> list[dict]:
    """Every schedule the compiler's table picks (lanec/codegen/schedules.json), at its shape."""
    table = json.loads((ROOT / "lanec" / "codegen" / "schedules.json").read_text()).get("kda_split", {})
    cases = []
    for key, entry in table.items():
        shape = {k: int(v) for k, v in (item.split("=") for item in key.split(","))}
        cases.append(case(shape["heads"], shape["batch"], shape["tokens"], schedule=entry["schedule"]))
    return cases


def cluster1() -> list[dict]:
    """One CTA a head (128 rows, four decays a gate lane)."""
    return [case(4, 2, schedule={"cluster": 1}), case(4, 2, schedule={"early": 1, "cluster": 1}),
            case(8, 17, schedule={"early": 2, "cluster": 1}), case(8, 17, schedule={"early": 3, "cluster": 1}),
            case(8, 17, schedule={"early": 2, "cluster": 1, "evict": True})]


def full() -> list[dict]:
    """heads x batch x tokens, gate form and bias alternating through the grid, plus the
    schedule cases of `quick`."""
    cases = []
    for i, heads in enumerate(HEADS):
        for j, batch in enumerate(BATCHES):
            for k, tokens in enumerate(TOKENS):
                form = "softplus" if (i + j + k) % 2 else "lower_bound"
                cases.append(case(heads, batch, tokens, form, has_bias=(i + 2 * j + k) % 3 == 0))
    seen = {stem(c) for c in cases}
    return cases + [c for c in quick() + cluster1() if stem(c) not in seen]


def bench() -> list[dict]:
    """bench/kda.py's grid: heads {4, 8, 32} x batch {1, 8, 32, 128, 256}, the batch defaults and
    early loads everywhere, the staged schedules at large batch, the cluster sizes at batch 1."""
    def knobs(early=0, lanes=0, occupancy=0, cluster=0, evict=False) -> dict:  # 0: the shape's default
        named = dict(early=early, lanes=lanes, occupancy=occupancy, cluster=cluster, evict=evict)
        return {k: v for k, v in named.items() if v}

    cases = [case(h, b, schedule=s) for h in (4, 8, 32) for b in (1, 8, 32, 128, 256)
             for s in (knobs(), knobs(early=1))]
    cases += [case(h, b, schedule=s) for h in (4, 8, 32) for b in (128, 256)
              for s in (knobs(early=2), knobs(early=2, evict=True), knobs(early=2, cluster=2, evict=True),
                        knobs(early=1, occupancy=5))]
    # staged state at 5-8 CTAs a SM: 32 lanes a state row keep 56-72 registers without spills
    staged = dict(early=2, lanes=32)
    cases += [case(h, b, schedule=s) for h in (4, 8, 32) for b in (128, 256)
              for s in (knobs(**staged, occupancy=5), knobs(**staged, occupancy=6), knobs(**staged, occupancy=7),
                        knobs(**staged, occupancy=6, evict=True), knobs(**staged, occupancy=7, evict=True),
                        knobs(**staged, occupancy=5, evict=True), knobs(**staged, occupancy=8, cluster=8),
                        knobs(**staged, occupancy=5, cluster=2, evict=True))]
    cases += [case(h, 1, schedule=s) for h in (4, 8, 32)
              for s in (knobs(early=1, cluster=16), knobs(early=1, cluster=4), knobs(early=1, cluster=1))]
    return [dict(c, slots=bench_slots(c["heads"], c["batch"])) for c in cases]


SETS = {"quick": quick, "cluster1": cluster1, "tuned": tuned, "full": full, "bench": bench}


def read_cases(name: str) -> list[dict]:
    """The specs of set `name` that were built (GPU side: no CuTe DSL needed)."""
    listing = json.loads(CASES_FILE.read_text())
    return listing[name]


def _build_one(spec: dict) -> str:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.kda_split import KdaSplit

    kernel = KdaSplit(spec["heads"], spec["batch"], spec["gate_mode"], spec["has_bias"], spec["schedule"],
                      spec["tokens"], spec["gate_form"], x_pitch=spec.get("x_pitch"), slots=spec.get("slots"),
                      gate_rank=spec.get("gate_rank"), gate_pitch=spec.get("gate_pitch"))
    compile_kernel(kernel).save(OUT, stem(spec))
    return stem(spec)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", action="append", choices=sorted(SETS), default=None)
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args(argv)
    names = options.set or ["quick"]
    listing = json.loads(CASES_FILE.read_text()) if CASES_FILE.is_file() else {}
    for name in names:
        specs = SETS[name]()
        with ProcessPoolExecutor(options.jobs) as pool:
            for done in pool.map(_build_one, specs):
                print("built", done, flush=True)
        listing[name] = [dict(spec, stem=stem(spec)) for spec in specs]
    OUT.mkdir(parents=True, exist_ok=True)
    CASES_FILE.write_text(json.dumps(listing, indent=1) + "\n")


if __name__ == "__main__":
    main()
