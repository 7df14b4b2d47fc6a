"""The compiler, top to bottom: each stage in order, by the name `lanec explain` and the lit tests
give it.

1. parse-verify   a form file becomes a verified module (a bad one is a one-line diagnostic)
   shard          with --tp N, the step of one rank of N (tensor parallel, lanec/passes/shard.py)
2. lane-before    the lane's own rules, before the shared rules can take their candidates
3. shared         fusion by dataflow alone
4. held-back      the lane's kernel facts: a fused op no kernel launches is split back
5. lower          one lane.launch per kernel, with its specialization and launch facts
6. codegen        the cute-dsl module: one CuTe DSL kernel specialization a launch
7. plan           each distinct specialization compiled for sm_90a (cached), written as plan.bin

Every rule records what it decided; `fuse` returns those decisions. A stage that refuses its
input raises lanec's own one-line error (`FormError`, located at the form file, or `LanecError`);
the commands print it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from lanec.diagnostics import FormError, LanecError, form_context, one_line, parse_verified, read_source
from lanec.passes.decisions import DECISIONS_ATTR, Decisions, decisions_of, held_back_cause
from lanec.passes.table import STAGES
from lanec.runtime.plan import Plan
from lanec.shim import LaneShim


# 1. parse-verify
def parse_verify(source: str | Path, name: str | None = None) -> tuple[ModuleOp, str]:
    """The verified module of a form file (a path) or form text, and the name diagnostics use."""
    text, where = read_source(source, name)
    return parse_verified(form_context(), text, where), where


# 1b. shard
def shard(module: ModuleOp, ranks: int, rank: int = 0, where: str = "<module>") -> list[str]:
    """The module made rank `rank`'s step of `ranks` (in place); returns a line an op saying how
    it splits and where the all-reduces are. A head count or width that does not divide by the
    ranks is a one-line FormError."""
    from lanec.passes.shard import ShardPass, sharding_lines

    try:
        ShardPass(ranks, rank).apply(form_context(), module)
    except DiagnosticException as error:
        raise FormError(where, f"shard: {one_line(str(error))}") from None
    try:
        module.verify()
    except VerifyException as error:
        raise FormError(where, f"internal error: shard left an invalid form: {one_line(str(error))}") from None
    return sharding_lines(module)


# 2-4. lane-before, shared, held-back
def fuse(module: ModuleOp, shim: LaneShim | Mapping[str, object] | None = None,
         where: str = "<module>") -> Decisions:
    """Run the rules table over the module under the lane's knobs (recorded in the module as
    `lane.shim`, which the rules read); returns every decision, in the order the rules made them.
    `shim`: the knobs, or those a command line gives (a mapping, None where not given) in place
    of the module's own (a combination with no meaning is a KnobError)."""
    if not isinstance(shim, LaneShim):
        shim = LaneShim.of(module, **(shim or {}))
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


def compile_rules(source: str | Path, shim: LaneShim | Mapping[str, object] | None = None,
                  name: str | None = None, tp: int = 1) -> tuple[ModuleOp, Decisions]:
    """Stages 1-4: the fused module and its decisions (with `tp` > 1, rank 0's of the sharded step)."""
    module, where = parse_verify(source, name)
    if tp > 1:
        shard(module, tp, 0, where)
    return module, fuse(module, shim, where)


# 5-7. lower, codegen, plan
@dataclass
class Compiled:
    plan: Plan
    lane: ModuleOp
    kernels: str
    decisions: Decisions


def lower(module: ModuleOp, where: str, tunings: list | None = None, grouped_experts: bool = False) -> ModuleOp:
    """5. lower: one lane.launch per kernel, each kernel shape under the tuned schedule table (an op
    with no kernel is named in the error); `tunings`, where given, gets each table lookup
    (kernel, shape, overrides) in launch order. `grouped_experts`: every mixture takes the grouped
    experts' path (`lanec compile --grouped-experts`)."""
    from lanec.codegen.lower import LoweringError, lower_module

    try:
        lane_module = lower_module(module, tunings, grouped_experts)
        lane_module.verify()
    except (LoweringError, ValueError) as error:
        # where a held-back rule split the op out of a fused one, the cause is that rule's fact
        cause = held_back_cause(getattr(error, "ops", ()))
        message = one_line(str(error))
        if cause is not None:
            message = f"{cause}; what it was split into has no launch: {message}"
        raise FormError(where, message) from None
    return lane_module


def codegen(lane_module: ModuleOp) -> str:
    """6. codegen: the cute-dsl module of kernel specializations (compiled in stage 7)."""
    from lanec.codegen.cute_dsl import kernel_source

    return kernel_source(lane_module)


def plan(form_module: ModuleOp, lane_module: ModuleOp, kernels: str, form_text: str, cache_dir: Path | None,
         progress, ranks: int = 1) -> Plan:
    """7. plan: compile each distinct specialization for sm_90a (cached by content) into plan.bin
    (for `ranks` > 1: rank 0's step, its all-reduces NCCL collectives)."""
    from functools import partial

    from lanec.codegen.compile import CompileError, compile_kernel
    from lanec.codegen.plan_writer import write_plan

    try:
        return write_plan(form_module, lane_module, form_text, kernels=kernels,
                          compile_kernel=partial(compile_kernel, cache_dir=cache_dir), progress=progress, ranks=ranks)
    except (CompileError, ValueError) as error:
        raise LanecError(str(error)) from None


def compile_plan(source: str | Path, shim: LaneShim | Mapping[str, object] | None = None, *,
                 cache_dir: Path | None = None, progress=None, tp: int = 1, grouped_experts: bool = False) -> Compiled:
    """The whole compiler: a form file to a plan. With `tp` > 1 the form is sharded (a model that
    does not divide says so) and the plan is rank 0's step for `tp` ranks, each all-reduce an NCCL
    collective (every rank runs the same kernels on its slices: lanec/runtime/parallel.py)."""
    module, where = parse_verify(source)
    if tp > 1:
        shard(module, tp, 0, where)
    form_text, _ = read_source(source, None)
    decisions = fuse(module, shim, where)
    lane_module = lower(module, where, grouped_experts=grouped_experts)
    kernels = codegen(lane_module)
    # the plan's oracle is the fused form: the same meaning (the rules preserve it), in the ops
    # the kernels compute, so --check can round where they store
    return Compiled(plan(module, lane_module, kernels, form_text, cache_dir, progress, tp), lane_module, kernels,
                    decisions)
