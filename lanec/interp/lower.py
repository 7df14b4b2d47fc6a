"""A `form` module as an interpreter `Program`: declarations from the step's leaves, one step a
`form` op, operands named as `ops.py` names its keywords."""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import (
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation

from lanec.dialects import form
from lanec.interp.ops import fail
from lanec.interp.program import OPS, Input, Program, State, Step, Weight
from lanec.runtime.dtypes import mlir_name

# form operand or result name -> ops.py keyword, where they differ
RENAME = {
    "product": {"weights": "w"},
    "norm": {"weight": "w"},
    "conv": {"weight": "w"},
    "norm_gated": {"weight": "w"},
    "head_norm": {"weight": "w"},
    "kda": {"beta": "beta_raw"},
    "add": {"lhs": "a", "rhs": "b"},
    "mul": {"lhs": "a", "rhs": "b"},
    "swiglu": {"lhs": "g", "rhs": "u"},
}

# properties that do not change an op's meaning
IGNORED = {"operandSegmentSizes", "path", "prologue", "epilogue"}


def dtype(typ: Attribute) -> str:
    """A tensor's element type as the program records it (its MLIR name, bf16, f32, i32, ...)."""
    assert isinstance(typ, TensorType)
    try:
        return mlir_name(str(typ.element_type))
    except ValueError:
        fail(f"the interpreter has no dtype for {typ.element_type}")


def dims(value: SSAValue) -> list[int]:
    return list(form.shape(value))


def plain(attr: Attribute, op: str, name: str) -> Any:
    if isinstance(attr, IntegerAttr):
        return attr.value.data
    if isinstance(attr, FloatAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    fail(f"{op}: the interpreter cannot read property {name} = {attr}")


def shard_of(op: form.WeightOp | form.StateOp) -> str:
    return "" if op.shard is None else op.shard.data


def program_of(module: ModuleOp) -> Program:
    """The interpreter's program of a module holding one form.step."""
    if not isinstance(module, ModuleOp):
        fail(f"expected a builtin.module, got {module.name}")
    top = list(module.ops)
    if len(top) != 1 or not isinstance(top[0], form.StepOp):
        names = ", ".join(op.name for op in top) or "nothing"
        fail(f"a module for the interpreter holds exactly one form.step, got {names}")
    step = top[0]
    ids: dict[SSAValue, int] = {}

    def define(value: SSAValue) -> int:
        ids[value] = len(ids)
        return ids[value]

    def use(value: SSAValue, op: str) -> int:
        if value not in ids:
            fail(f"{op} reads a value defined outside its form.step")
        return ids[value]

    program = Program(step.batch.value.data, step.tokens.value.data, [], [], [], [], [])
    for op in step.body.block.ops:
        if isinstance(op, form.InputOp):
            program.inputs.append(Input(define(op.result), op.role.data, dims(op.result),
                                        dtype(op.result.type)))
        elif isinstance(op, form.WeightOp):
            program.weights.append(Weight(define(op.result), op.weight_name.data, op.format.data,
                                          dims(op.result), dtype(op.result.type), shard_of(op)))
        elif isinstance(op, form.StateOp):
            program.states.append(State(define(op.result), op.state_name.data, op.kind.data,
                                        dims(op.result), dtype(op.result.type), shard_of(op)))
        elif isinstance(op, form.ReturnOp):
            program.outputs = [use(v, op.name) for v in op.outputs]
        else:
            program.steps.append(step_of(op, use, define))
    return program


def step_of(op, use, define) -> Step:
    kind = op.name.removeprefix("form.")
    if not op.name.startswith("form.") or kind not in OPS or not isinstance(op, IRDLOperation):
        fail(f"the interpreter has no meaning for {op.name}")
    rename = RENAME.get(kind, {})
    definition = type(op).get_irdl_definition()
    operands: dict[str, int | list[int]] = {}
    for name, _ in definition.operands:
        got = getattr(op, name)
        key = rename.get(name, name)
        if got is None:
            continue
        if isinstance(got, SSAValue):
            operands[key] = use(got, op.name)
        else:  # a variadic operand
            operands[key] = [use(v, op.name) for v in got]
    properties = {name: plain(attr, op.name, name)
                  for name, attr in op.properties.items() if name not in IGNORED}
    results = [define(r) for r in op.results]
    stores = [dtype(r.type) for r in op.results]
    if isinstance(op, form.NormOp) and op.prologue is not None and op.prologue.data == "gemv":
        stores[0] = "f32"  # computed in its reader's prologue and never stored: the gemv dots it unrounded
    return Step(kind, operands, results, properties, stores)
