"""The compiler, top to bottom: each stage in order, by the name `lanec explain` and the lit tests
give it.

1. parse-verify   a form file becomes a verified module (a bad one is a one-line diagnostic)
2. lane-before    the lane's own rules, before the shared rules can take their candidates
3. shared         fusion by dataflow alone
4. held-back      the lane's kernel facts: a fused op no kernel launches is split back
5. lower          one lane.launch per kernel, with its specialization and launch facts
6. codegen        the cute-dsl module: one CuTe DSL kernel specialization a launch
7. plan           each distinct specialization compiled for sm_90a (cached), written as plan.bin

Every rule records what it decided; `fuse` returns those decisions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from lanec.diagnostics import FormError, form_context, one_line, parse_verified, read_source
from lanec.lane import LaneShim
from lanec.passes.decisions import DECISIONS_ATTR, Decisions, decisions_of
from lanec.passes.table import STAGES
from lanec.runtime.plan import Plan


# 1. parse-verify
def parse_verify(source: str | Path, name: str | None = None) -> tuple[ModuleOp, str]:
    """The verified module of a form file (a path) or form text, and the name diagnostics use."""
    text, where = read_source(source, name)
    return parse_verified(form_context(), text, where), where


# 2-4. lane-before, shared, held-back
def fuse(module: ModuleOp, shim: LaneShim, where: str = "<module>") -> Decisions:
    """Run the rules table over the module under the lane's knobs (recorded in the module as
    `lane.shim`); returns every decision, in the order the rules made them."""
    shim.record(module)
    module.attributes.pop(DECISIONS_ATTR, None)
    ctx = form_context()
    for stage in STAGES:
        try:
            stage().apply(ctx, module)
        except DiagnosticException as error:
            raise FormError(where, f"{stage.name}: {one_line(str(error))}") from None
        try:
            module.verify()
        except VerifyException as error:  # a rule that breaks the form is lanec's bug: say where
            raise FormError(where, f"internal error: the {stage.name} rules left an invalid form: "
                                   f"{one_line(str(error))}") from None
    return decisions_of(module)


def compile_rules(source: str | Path, shim: LaneShim, name: str | None = None) -> tuple[ModuleOp, Decisions]:
    """Stages 1-4: the fused module and its decisions."""
    module, where = parse_verify(source, name)
    return module, fuse(module, shim, where)


# 5-7. lower, codegen, plan
@dataclass
class Compiled:
    plan: Plan
    lane: ModuleOp
    kernels: str
    decisions: Decisions


def lower(module: ModuleOp, where: str) -> ModuleOp:
    """5. lower: one lane.launch per kernel (an op with no kernel is named in the error)."""
    from lanec.codegen.lower import LoweringError, lower_module
    from lanec.codegen.schedules import schedule_for

    try:
        lane_module = lower_module(module, schedules=schedule_for)
        lane_module.verify()
    except (LoweringError, ValueError) as error:
        raise FormError(where, one_line(str(error))) from None
    return lane_module


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

        if not self.overrides:
            chosen = "not in the table: the kernel's defaults"
        else:
            chosen = f"table: {spec_text(self.overrides)}" + (f" ({self.us} us measured)" if self.us is not None else "")
        return f"{self.kernel:<11} {spec_text(self.shape):<40} x{self.launches:<3} {chosen}"


def tunings(module: ModuleOp) -> list[Tuning]:
    """5. lower, for `lanec explain`: each distinct (kernel, shape) the lowering looked up in the
    schedule table, with its launch count and what the table gave it. Raises LoweringError where
    an op has no kernel. The fused module is cloned: the caller's stays as it was."""
    from lanec.codegen.lower import lower_module
    from lanec.codegen.schedules import measured_us, schedule_for

    found: list[tuple[str, dict, dict]] = []
    lower_module(module.clone(), schedules=schedule_for, tunings=found)
    merged: dict[str, Tuning] = {}
    for kernel, shape, overrides in found:
        name = f"{kernel} {sorted(shape.items())}"
        known = merged.get(name)
        count = 1 if known is None else known.launches + 1
        merged[name] = Tuning(kernel, shape, count, overrides, measured_us(kernel, shape) if overrides else None)
    return list(merged.values())


def codegen(lane_module: ModuleOp) -> str:
    """6. codegen: the cute-dsl module of kernel specializations (compiled in stage 7)."""
    from lanec.codegen.cute_dsl import kernel_source

    return kernel_source(lane_module)


def plan(form_module: ModuleOp, lane_module: ModuleOp, kernels: str, form_text: str, cache_dir: Path | None,
         progress) -> Plan:
    """7. plan: compile each distinct specialization for sm_90a (cached by content) into plan.bin."""
    from functools import partial

    from lanec.codegen.compile import CompileError, compile_kernel
    from lanec.codegen.plan_writer import write_plan

    try:
        return write_plan(form_module, lane_module, form_text, kernels=kernels,
                          compile_kernel=partial(compile_kernel, cache_dir=cache_dir), progress=progress)
    except (CompileError, ValueError) as error:
        raise click.ClickException(one_line(str(error))) from None


def compile_plan(source: str | Path, shim: LaneShim, *, cache_dir: Path | None = None, progress=None) -> Compiled:
    """The whole compiler: a form file to a plan."""
    module, where = parse_verify(source)
    form_text, _ = read_source(source, None)
    decisions = fuse(module, shim, where)
    lane_module = lower(module, where)
    kernels = codegen(lane_module)
    # the plan's oracle is the fused form: the same meaning (the rules preserve it), in the ops
    # the kernels compute, so --check can round where they store
    return Compiled(plan(module, lane_module, kernels, form_text, cache_dir, progress), lane_module, kernels,
                    decisions)
