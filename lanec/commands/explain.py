"""`lanec explain`: run the rules table (pipeline stages 1-4) and print every candidate fusion,
taken or held back, with the rule and the kernel fact that decided it; then lower (stage 5) and
print what the schedule table gave each kernel shape (or which ops have no lane kernel yet).

`--json` prints one object, keys sorted, two-space indented (schema `lanec.explain/1`):

    {
      "decisions": [                 # sorted by stage, then rule (table order), layer, op
        {"layer": 3 | null,          # the layer its checkpoint names reveal
         "op": "kda (self_attn.q_conv1d, ...)",   # the op's kind, name and first weights
         "reason": "...",            # the condition, in words and numbers
         "rule": "hold-kda",         # the rule's kebab name (as `lanec opt -p` takes it)
         "stage": "held-back",       # lane-before | shared | held-back
         "taken": true}
      ],
      "model": "examples/kimi-linear-small.mlir",
      "schema": "lanec.explain/1",
      "shim": {"batch_products": false, "fold_argmax": false, "fold_gate": true, "fold_norms": true,
               "fold_router_norms": true, "fuse_quant": false, "numerics": "precise", "words": 1},
      "summary": {"held_back": 3, "taken": 40},
      "sharding": {"ranks": 2, "rank": 0,   # only with --tp N > 1: a line an op, and each all_reduce
                   "ops": ["layer 0   product (self_attn.o_proj): row-parallel: ...", ...]},
      "schedules": {                 # stage 5: what the schedule table gave each kernel shape
        "lowered": true,             # false (with "reason") where an op has no lane kernel yet
        "kernels": [                 # in launch order
          {"kernel": "kda_split", "shape": {"batch": 256, "heads": 32, "tokens": 1},
           "launches": 2, "table": {"schedule": [2, 32, 5]} | null, "us": 298.01 | null}
        ]}
    }
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import click

from lanec.commands import reported
from lanec.commands.knobs import grouped_option, knob_options, shim_of, tp_option

SCHEMA = "lanec.explain/1"


@dataclass(frozen=True)
class Tuning:
    """One kernel shape of the lowered step and what the schedule table gave it."""

    kernel: str
    shape: dict
    launches: int
    overrides: dict  # {} where the table has no entry: the kernel's own defaults
    us: float | None  # the bench's time for the entry

    def line(self) -> str:
        from lanec.runtime.plan import spec_text

        if "why" in self.overrides:  # a decision the lowering makes itself (an attention's split count)
            made = " ".join(f"{k} {v}" for k, v in self.overrides.items() if k != "why")
            chosen = f"{made}: {self.overrides['why']}" if made else self.overrides["why"]
        elif not self.overrides:
            chosen = "not in the table: the kernel's defaults"
        else:
            measured = f" ({self.us} us measured)" if self.us is not None else ""
            chosen = f"table: {spec_text(self.overrides)}{measured}"
        return f"{self.kernel:<11} {spec_text(self.shape):<40} x{self.launches:<3} {chosen}"


def tunings(module, where: str, grouped_experts: bool = False) -> list[Tuning]:
    """Stage 5 (lower) of the fused `module`, for its schedule table lookups: each distinct
    (kernel, shape), with its launch count and what the table gave it. Raises the lowering's
    FormError where an op has no kernel. The module is cloned: the caller's stays as it was."""
    from lanec.codegen.schedules import measured_us
    from lanec.pipeline import lower

    found: list[tuple[str, dict, dict]] = []
    lower(module.clone(), where, tunings=found, grouped_experts=grouped_experts)
    merged: dict[str, Tuning] = {}
    for kernel, shape, overrides in found:
        name = f"{kernel} {sorted(shape.items())}"
        known = merged.get(name)
        count = 1 if known is None else known.launches + 1
        us = measured_us(kernel, shape) if overrides and "why" not in overrides else None
        merged[name] = Tuning(kernel, shape, count, overrides, us)
    return list(merged.values())


def sort_key(decision, order: dict[str, int]) -> tuple:
    from lanec.passes.decisions import STAGES

    layer = -1 if decision.layer is None else decision.layer
    return (STAGES.index(decision.stage), order[decision.rule], layer, decision.op, decision.reason)


def schedules(module, where: str, grouped_experts: bool = False) -> dict:
    """Stage 5's schedule lookups of the fused `module` (see the module's docstring); a mixture's
    entry says which path it took and why."""
    from lanec.diagnostics import FormError

    try:
        found = tunings(module, where, grouped_experts)
    except FormError as error:
        return {"lowered": False, "reason": error.message}
    return {"lowered": True, "kernels": [
        {"kernel": t.kernel, "shape": t.shape, "launches": t.launches,
         "table": json.loads(json.dumps(t.overrides)) or None, "us": t.us} for t in found]}


def report(model: str, shim, decisions, module=None, tp: int = 1, grouped_experts: bool = False) -> dict:
    from dataclasses import asdict

    from lanec.passes.shard import sharding_lines
    from lanec.passes.table import RULES

    order = {rule.name: i for i, rule in enumerate(RULES)}
    ordered = sorted(decisions, key=lambda d: sort_key(d, order))
    taken = sum(d.taken for d in ordered)
    return {
        "schema": SCHEMA,
        "model": model,
        "shim": asdict(shim),
        "decisions": [d.as_json() for d in ordered],
        "summary": {"taken": taken, "held_back": len(ordered) - taken},
        **({"sharding": {"ranks": tp, "rank": 0, "ops": sharding_lines(module)}} if tp > 1 else {}),
        **({"schedules": schedules(module, model, grouped_experts)} if module is not None else {}),
    }


@click.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help=f"print the decisions as JSON (schema {SCHEMA})")
@knob_options
@tp_option
@grouped_option
def explain(model: str, as_json: bool, numerics: str, words: str, fuse_quant: bool | None, batch_products: bool,
            fold_norms: bool | None, fold_argmax: bool, fold_gate: bool | None, fold_router_norms: bool | None, tp: int,
            grouped_experts: bool) -> None:
    """Print every fusion the rules considered in MODEL (a form file), taken or held back, and why;
    then each kernel shape's schedule, from the tuned table or the kernel's defaults. With --tp N
    first how each op splits over N ranks and every all-reduce, then rank 0's fusions."""
    from lanec.pipeline import compile_rules
    from lanec.shim import LaneShim

    shim = shim_of(numerics, words, fuse_quant, batch_products, fold_norms, fold_argmax, fold_gate, fold_router_norms)
    with reported():
        module, decisions = compile_rules(model, shim, tp=tp)
        # the knobs the rules ran under
        data = report(model, LaneShim.of(module), decisions, module, tp, grouped_experts)
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    knobs = ", ".join(f"{k}={v}" for k, v in data["shim"].items())
    click.echo(f"{model}: {data['summary']['taken']} taken, {data['summary']['held_back']} held back ({knobs})")
    if "sharding" in data:
        click.echo(f"\nshard (--tp {tp}; the rules below ran on rank 0's step):")
        for line in data["sharding"]["ops"]:
            click.echo("  " + line)
    stage = None
    from lanec.passes.decisions import Decision

    for entry in data["decisions"]:
        decision = Decision(**entry)
        if decision.stage != stage:
            stage = decision.stage
            click.echo(f"\n{stage}:")
        click.echo("  " + decision.line())
    tuned = data["schedules"]
    if not tuned["lowered"]:
        click.echo(f"\nschedules (stage 5): not lowered: {tuned['reason']}")
        return
    click.echo("\nschedules (stage 5, lanec/codegen/schedules.json):")
    for entry in tuned["kernels"]:
        click.echo("  " + Tuning(entry["kernel"], entry["shape"], entry["launches"], entry["table"] or {},
                                 entry["us"]).line())
