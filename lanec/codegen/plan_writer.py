"""The plan writer: a lowered lane step, its compiled kernels, and the form it came from -> one
`Plan` (lanec/runtime/plan.py), ready to write as plan.bin.

Weight sources keep the form's weight names and shapes; each carries the seeded initialiser the
runtime uses when no checkpoint holds it (bounded values, by what the weight is: norm weights
near one, product rows scaled by their fan-in, the KDA gate's A_log and dt_bias in fla's
ranges), so `lanec run --check` can give the interpreter exactly the values the GPU gets. A rank's
weight of a sharded step keeps the whole tensor's initialiser (its fan-in is the whole's) and names
its slice, so every rank's values are slices of the one model's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace

from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import SSAValue

from lanec.codegen.cute_dsl import kernel_objects, kernel_source
from lanec.codegen.kernels.all_reduce import AllReduceNorm, OneShotAllReduce
from lanec.codegen.kernels.base import traffic
from lanec.codegen.lower import dtype_name
from lanec.codegen.spec import from_attr, spec_of
from lanec.dialects import lane
from lanec.interp.environment import initialiser, uses_of
from lanec.interp.program import Program
from lanec.interp.tp import Shard
from lanec.runtime.gpu_seeding import SEEDED_DTYPES, SEEDER_COUNT
from lanec.runtime.launch import tensor_map_record
from lanec.runtime.peer import PeerLayout
from lanec.runtime.plan import (
    Arg,
    Buffer,
    Collective,
    Fused,
    Launch,
    OneShot,
    Plan,
    Seeder,
    Shape,
    Source,
    Transform,
    WeightBinding,
)


def weight_sources(program: Program) -> dict[str, Source]:
    uses = uses_of(program)
    sources = {}
    for weight in program.weights:
        shape = tuple(weight.shape)
        whole = Shard.parse(weight.shard).whole(shape) if weight.shard else shape
        center, scale = initialiser(set(uses.get(weight.value, [])), whole)
        sources[weight.name] = Source(weight.name, shape, weight.dtype, scale, center, weight.shard)
    return sources


def address(value: SSAValue) -> Arg:
    owner = value.owner
    if isinstance(owner, lane.ViewOp):
        base = address(owner.base)
        return Arg(base.buffer, base.offset + owner.offset.value.data)
    assert isinstance(owner, lane.BufferOp)
    return Arg(owner.buffer_name.data, 0)


def launch_args(op: lane.LaunchOp, kernel) -> tuple[Arg, ...]:
    """The launch's args, one a kernel param; a tensor-map param's carries the map's record (its
    window is the mapped param's)."""
    params = kernel.params()
    by_name = {p.name: p for p in params}
    args = []
    for param, value in zip(params, op.args, strict=True):
        arg = address(value)
        if param.tensor_map is not None:
            arg = replace(arg, map=tensor_map_record(by_name[param.tensor_map["of"]], param))
        args.append(arg)
    return tuple(args)


def write_plan(form_module: ModuleOp, lane_module: ModuleOp, form_text: str, *, compile_kernel: Callable,
               kernels: str | None = None, progress: Callable[[int, int, str], None] | None = None,
               ranks: int = 1) -> Plan:
    """The plan of `lane_module`: `kernels` is its cute-dsl module (printed here when not given),
    whose kernel objects are compiled, one per distinct specialization; with `ranks` > 1, rank 0's
    step of a tensor-parallel plan, each `lane.all_reduce` a collective at its place."""
    from lanec.interp.lower import program_of

    program = program_of(form_module)
    sources = weight_sources(program)
    step = next(op for op in lane_module.ops if isinstance(op, lane.StepOp))
    plan = Plan(program=program.to_json(), form=form_text, ranks=ranks)
    for op in step.body.block.ops:
        if not isinstance(op, lane.BufferOp):
            continue
        assert isinstance(op.result.type, MemRefType)
        name, role = op.buffer_name.data, op.role.data
        source = None if op.source is None else op.source.data
        if role == "output":
            source = int(source)
        plan.buffers.append(Buffer(name, tuple(op.result.type.get_shape()), dtype_name(op.result.type.element_type),
                                   role, source))
        if role == "weight":
            assert op.sources is not None and op.transforms is not None
            chain = tuple(Transform(t.data["kind"].data, {k: from_attr(v) for k, v in t.data.items() if k != "kind"})
                          for t in op.transforms.data)
            plan.weights.append(WeightBinding(name, tuple(sources[s.data] for s in op.sources.data), chain))

    launches = [op for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]
    at = 0  # the launches before
    for op in step.body.block.ops:
        at += isinstance(op, lane.LaunchOp)
        if isinstance(op, lane.AllReduceOp):
            if op.ranks.value.data != ranks:
                raise ValueError(f"an all_reduce over {op.ranks.value.data} ranks in a plan for {ranks}")
            assert isinstance(op.source.type, MemRefType)
            source, target = address(op.source), address(op.target)
            count, dtype = math.prod(op.source.type.get_shape()), dtype_name(op.source.type.element_type)
            oneshot = None
            if not PeerLayout(count, dtype, ranks).problems():
                # the one-shot kernel beside NCCL's: the runtime takes the faster (runtime/peer.py)
                artifact = compile_kernel(OneShotAllReduce(count, dtype, ranks))
                oneshot = OneShot(plan.add_cubin(artifact.cubin), artifact.entry, Shape.of(artifact.launch))
            fused = None
            if op.into is not None and oneshot is not None:
                fused = fused_norm(op, launches[at], at, ranks, plan, compile_kernel)
            plan.collectives.append(Collective(f"all_reduce {target.buffer}", at, source, target, count, dtype,
                                               oneshot, fused))
    objects = kernel_objects(kernels if kernels is not None else kernel_source(lane_module))
    compiled: dict[str, object] = {}
    for index, (op, kernel) in enumerate(zip(launches, objects, strict=True)):
        key = repr(sorted(vars(kernel).items()))
        if progress is not None:
            progress(index, len(launches), op.kernel.data)
        if key not in compiled:
            compiled[key] = compile_kernel(kernel)
        artifact = compiled[key]
        built = Shape.of(artifact.launch)
        if replace(op.shape, pdl=built.pdl) != built:
            raise ValueError(f"launch {index} ({op.kernel.data}): the lane step's launch facts disagree with the "
                             "compiled kernel's; recompile from the form")
        label = f"{op.kernel.data} {address(op.args[-1]).buffer}"
        plan.launches.append(Launch(label, plan.add_cubin(artifact.cubin), artifact.entry,
                                    replace(built, pdl=op.shape.pdl),  # off after an all-reduce
                                    launch_args(op, kernel),
                                    json.loads(json.dumps(spec_of(op))),  # as a reread plan holds it
                                    traffic(kernel)))
    from lanec.codegen.kernels.seeded import Seeded

    for dtype in SEEDED_DTYPES:  # the seeded weights' generator, for the runtime to fill on the GPU
        seeder = compile_kernel(Seeded(SEEDER_COUNT, dtype))
        plan.seeders.append(Seeder(dtype, seeder.entry, Shape.of(seeder.launch), SEEDER_COUNT, seeder.cubin))
    plan.validate()
    return plan


def fused_norm(op: lane.AllReduceOp, norm: lane.LaunchOp, at: int, ranks: int, plan: Plan,
               compile_kernel: Callable) -> Fused:
    """The all_reduce_norm launch of an all-reduce marked into the rmsnorm launch after it (`norm`,
    launch `at`): the norm's arguments with the all-reduce's total replaced by its partial sums, in
    the norm's x place (x + residual adds either way round: the same bits)."""
    spec = spec_of(norm)
    target = address(op.target)
    args = [address(v) for v in norm.args]
    if norm.kernel.data != "rmsnorm" or spec.get("quantize") or target not in args[:2]:
        raise ValueError(f"launch {at} ({norm.kernel.data}): an all_reduce into the rmsnorm after it finds no "
                         "rmsnorm of bf16 rows reading its total there")
    residual = bool(spec["residual"])
    other = [a for a in args[:1 + residual] if a != target]
    artifact = compile_kernel(AllReduceNorm(int(spec["rows"]), int(spec["width"]), float(spec["eps"]), ranks,
                                            residual))
    return Fused(plan.add_cubin(artifact.cubin), artifact.entry, Shape.of(artifact.launch),
                 (address(op.source), *other, *args[1 + residual:]), at, int(spec["rows"]))


__all__ = ["write_plan"]
