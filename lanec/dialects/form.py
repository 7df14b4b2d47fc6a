"""The `form` dialect: one model's decode step, as the fusion rules see it.

A module holds one `form.step`; its region lists the step's inputs, weights and states, then the
ops of the step, and ends in `form.return`, whose operands are the step's outputs. Rows are
`batch * tokens` (request b's token t is row b * tokens + t). Activations are `tensor<rows x
width>` of bf16 (or f32); a quantized activation is i8. States are updated in place through the
slot table: slots <= 0 are padding (zero output, never written).

    form.step {batch = 1 : i64, tokens = 1 : i64} {
      %tokens = form.input {role = "tokens"} : tensor<1xi32>
      %table = form.weight {name = "embed", format = "bf16"} : tensor<32x16xbf16>
      %h = form.embed %tokens, %table : (tensor<1xi32>, tensor<32x16xbf16>) -> tensor<1x16xbf16>
      form.return %h : tensor<1x16xbf16>
    }

Every op's exact meaning is `lanec/interp/`; docs/semantics.md states it for users, an op a row.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    BFloat16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from lanec.runtime.dtypes import Q8_0_BLOCK

# ----------------------------------------------------------------------------------------------
# Shapes, element types and properties


BLOCK = Q8_0_BLOCK  # the quantized form's block: q8_0 weights and int8 activations scale 32 values


def shape(value: SSAValue | Attribute) -> tuple[int, ...]:
    typ = value if isinstance(value, Attribute) else value.type
    if not isinstance(typ, TensorType):
        raise VerifyException(f"expected a tensor, got {typ}")
    return tuple(typ.get_shape())


def element(value: SSAValue) -> Attribute:
    assert isinstance(value.type, TensorType)
    return value.type.element_type


def is_float(value: SSAValue) -> bool:
    return isinstance(element(value), BFloat16Type | Float32Type)


def is_int(value: SSAValue, width: int) -> bool:
    typ = element(value)
    return isinstance(typ, IntegerType) and typ.width.data == width


def tensor(dims: Sequence[int], elem: Attribute | None = None) -> TensorType:
    return TensorType(elem or BFloat16Type(), list(dims))


def int_prop(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


def float_prop(value: float) -> FloatAttr:
    return FloatAttr(value, Float64Type())


def fail(message: str) -> None:
    raise VerifyException(message)


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise VerifyException(message)


def rows_width(value: SSAValue, what: str) -> tuple[int, int]:
    dims = shape(value)
    expect(len(dims) == 2, f"{what} must be a [rows, width] tensor, got {list(dims)}")
    return dims[0], dims[1]


def same_rows(op: str, *values: tuple[str, SSAValue]) -> int:
    rows = {name: rows_width(v, f"{op}: {name}")[0] for name, v in values}
    if len(set(rows.values())) != 1:
        listed = ", ".join(f"{name} {n}" for name, n in rows.items())
        fail(f"{op}: operands disagree on rows ({listed})")
    return next(iter(rows.values()))


class QuantizedEpilogue:
    """Producers that may quantize their result in an epilogue (the `fuse_quant` rule sets
    `quantize` to the number of int8 words a value; the result type becomes i8)."""

    def quantize_words(self) -> int:
        attr = self.properties.get("quantize")  # type: ignore[attr-defined]
        return 0 if attr is None else attr.value.data

    def verify_epilogue(self, result: SSAValue) -> None:
        words = self.quantize_words()
        expect(words in (0, 1, 2), f"quantize epilogue of {words} words: one or two int8 words a value")
        if words:
            _, width = rows_width(result, "a quantized result")
            expect(is_int(result, 8), "a quantizing epilogue writes an i8 result")
            expect(width % BLOCK == 0, f"quantized width {width} is not whole {BLOCK}-value blocks")
        else:
            expect(is_float(result), "the result must be bf16 or f32 (i8 only with a quantize epilogue)")


# ----------------------------------------------------------------------------------------------
# The step and its leaves


@irdl_op_definition
class StepOp(IRDLOperation):
    """The decode step: `batch` requests of `tokens` rows each (tokens > 1: speculative verify)."""

    name = "form.step"
    irdl_options = (ParsePropInAttrDict(),)
    batch = prop_def(IntegerAttr[I64])
    tokens = prop_def(IntegerAttr[I64])
    body = region_def("single_block")
    assembly_format = "`batch` $batch `tokens` $tokens attr-dict-with-keyword $body"

    def __init__(self, batch: int, tokens: int, body: Region):
        super().__init__(properties={"batch": int_prop(batch), "tokens": int_prop(tokens)}, regions=[body])

    @property
    def rows(self) -> int:
        return self.batch.value.data * self.tokens.value.data

    def verify_(self) -> None:
        expect(self.batch.value.data >= 1, f"batch {self.batch.value.data}: at least one request")
        expect(self.tokens.value.data >= 1, f"tokens {self.tokens.value.data}: at least one a request")
        block = self.body.block
        expect(block.last_op is not None and isinstance(block.last_op, ReturnOp), "a step ends in form.return")


def step_of(op: Operation) -> StepOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, StepOp):
        parent = parent.parent_op()
    return parent


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """The step's outputs (the next tokens, logits, or any value a test wants to see)."""

    name = "form.return"
    irdl_options = (ParsePropInAttrDict(),)
    outputs = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(StepOp))
    assembly_format = "($outputs^ `:` type($outputs))? attr-dict"

    def __init__(self, outputs: Sequence[SSAValue]):
        super().__init__(operands=[outputs])


INPUT_ROLES = ("tokens", "positions", "slots", "accepted", "pages")


@irdl_op_definition
class InputOp(IRDLOperation):
    """A per-step input from the host: token ids and positions [rows], the slot table ([batch],
    or [batch, >= tokens] for a speculative step), accepted counts [batch], KV pages [batch, n]."""

    name = "form.input"
    irdl_options = (ParsePropInAttrDict(),)
    role = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, role: str, typ: TensorType):
        super().__init__(properties={"role": StringAttr(role)}, result_types=[typ])

    def verify_(self) -> None:
        role = self.role.data
        expect(role in INPUT_ROLES, f"input role '{role}': one of {', '.join(INPUT_ROLES)}")
        expect(is_int(self.result, 32), f"the {role} input is i32")
        dims = shape(self.result)
        step = step_of(self)
        if role in ("tokens", "positions"):
            expect(len(dims) == 1, f"the {role} input is [rows], got {list(dims)}")
            if step is not None:
                expect(dims[0] == step.rows, f"the {role} input has {dims[0]} rows; the step has {step.rows}")
        elif role == "slots":
            expect(len(dims) in (1, 2), f"the slot table is [batch] or [batch, tokens], got {list(dims)}")
            if step is not None:
                b, q = step.batch.value.data, step.tokens.value.data
                expect(dims[0] == b, f"the slot table has {dims[0]} requests; the step has {b}")
                width = dims[1] if len(dims) == 2 else 1
                expect(width >= q, f"the slot table has {width} slots a request; a step of {q} tokens needs {q}")
        elif role == "accepted":
            expect(len(dims) == 1, f"accepted counts are [batch], got {list(dims)}")
        else:
            expect(len(dims) == 2, f"KV pages are [batch, pages], got {list(dims)}")
        if role in ("accepted", "pages") and step is not None:
            b = step.batch.value.data
            expect(dims[0] == b, f"the {role} input has {dims[0]} requests; the step has {b}")


WEIGHT_FORMATS = ("bf16", "q8_0")


def check_shard(shard: StringAttr | None) -> None:
    if shard is None:
        return
    from lanec.interp.tp import Shard

    try:
        Shard.parse(shard.data)
    except ValueError as error:
        fail(str(error))


@irdl_op_definition
class WeightOp(IRDLOperation):
    """A checkpoint tensor: rows of [outputs, inputs] for a product, or a vector. `q8_0` stores
    blocks of 32 int8 values with one fp16 scale each. In a rank's step (`lanec/passes/shard.py`)
    `shard` names the slice of the checkpoint tensor the rank holds: `"dim 0 part 1 of 2"`."""

    name = "form.weight"
    irdl_options = (ParsePropInAttrDict(),)
    weight_name = prop_def(StringAttr, prop_name="name")
    format = prop_def(StringAttr)
    shard = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, name: str, typ: TensorType, format: str = "bf16"):
        super().__init__(
            properties={"name": StringAttr(name), "format": StringAttr(format)}, result_types=[typ]
        )

    def verify_(self) -> None:
        fmt = self.format.data
        expect(fmt in WEIGHT_FORMATS, f"weight format '{fmt}': one of {', '.join(WEIGHT_FORMATS)}")
        expect(self.weight_name.data != "", "a weight needs a checkpoint name")
        expect(is_float(self.result), "weights are bf16 or f32 values (their format says how they are stored)")
        check_shard(self.shard)
        if fmt == "q8_0":
            dims = shape(self.result)
            expect(len(dims) >= 2, "a q8_0 weight holds product rows: [outputs, inputs] (or [experts, ...])")
            expect(dims[-1] % BLOCK == 0, f"q8_0 rows of {dims[-1]} values are not whole {BLOCK}-value blocks")


STATE_KINDS = {"conv": 3, "recurrent": 4, "kv": 4, "latent": 3}


@irdl_op_definition
class StateOp(IRDLOperation):
    """A state kept across steps, indexed by slot (conv [slot, channels, taps], recurrent
    [slot, head, value, key]) or by page (kv [page, page_size, kv_heads, head_dim], latent
    [page, page_size, row]). In a rank's step `shard` names the rank's slice of the state (as a
    weight's)."""

    name = "form.state"
    irdl_options = (ParsePropInAttrDict(),)
    state_name = prop_def(StringAttr, prop_name="name")
    kind = prop_def(StringAttr)
    shard = opt_prop_def(StringAttr)
    result = result_def(TensorType)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, name: str, kind: str, typ: TensorType):
        super().__init__(properties={"name": StringAttr(name), "kind": StringAttr(kind)}, result_types=[typ])

    def verify_(self) -> None:
        kind = self.kind.data
        expect(kind in STATE_KINDS, f"state kind '{kind}': one of {', '.join(STATE_KINDS)}")
        rank = len(shape(self.result))
        expect(rank == STATE_KINDS[kind], f"a {kind} state has rank {STATE_KINDS[kind]}, got {rank}")
        if kind == "recurrent":
            expect(isinstance(element(self.result), Float32Type), "the recurrent state is f32")
        check_shard(self.shard)


# ----------------------------------------------------------------------------------------------
# Products


@irdl_op_definition
class EmbedOp(IRDLOperation):
    """Rows of the embedding table for the step's tokens."""

    name = "form.embed"
    irdl_options = (ParsePropInAttrDict(),)
    tokens = operand_def(TensorType)
    table = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$tokens `,` $table attr-dict `:` functional-type(operands, results)"

    def __init__(self, tokens: SSAValue, table: SSAValue):
        vocab, hidden = shape(table)
        super().__init__(operands=[tokens, table], result_types=[tensor([shape(tokens)[0], hidden])])

    def verify_(self) -> None:
        expect(is_int(self.tokens, 32) and len(shape(self.tokens)) == 1, "embed reads token ids [rows] of i32")
        vocab_hidden = shape(self.table)
        expect(len(vocab_hidden) == 2, "the embedding table is [vocab, hidden]")
        expect(shape(self.result) == (shape(self.tokens)[0], vocab_hidden[1]), "embed result must be [rows, hidden]")


def part_props(heads: int, unit: int, offset: int, length: int) -> dict[str, Attribute]:
    return {k: int_prop(v) for k, v in dict(heads=heads, unit=unit, offset=offset, length=length).items()}


@irdl_op_definition
class ProductOp(IRDLOperation, QuantizedEpilogue):
    """Activation times weight rows: `y_i = x @ w_i^T` for each weight (several weights: one
    product in parts, one result a part). With a per-head part (heads, unit, offset, length),
    each head h reads x[:, h * unit + offset : + length] in place and has its own rows:
    w [heads * n, length], y[:, h * n + j] = x_part_h . w[h * n + j]."""

    name = "form.product"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    weights = var_operand_def(TensorType)
    parts = var_result_def(TensorType)
    heads = opt_prop_def(IntegerAttr[I64])
    unit = opt_prop_def(IntegerAttr[I64])
    offset = opt_prop_def(IntegerAttr[I64])
    length = opt_prop_def(IntegerAttr[I64])
    quantize = opt_prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$x `,` $weights attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        x: SSAValue,
        weights: Sequence[SSAValue],
        part: tuple[int, int, int, int] | None = None,
        result_types: Sequence[Attribute] | None = None,
    ):
        rows = shape(x)[0]
        props = part_props(*part) if part else {}
        if result_types is None:
            result_types = [tensor([rows, shape(w)[0]]) for w in weights]
        super().__init__(operands=[x, weights], properties=props, result_types=[list(result_types)])

    def part(self) -> tuple[int, int, int, int] | None:
        if self.heads is None:
            return None
        return (self.heads.value.data, self.unit.value.data, self.offset.value.data, self.length.value.data)

    def verify_(self) -> None:
        expect(len(self.weights) >= 1, "a product needs at least one weight")
        expect(len(self.weights) == len(self.parts), "a product in parts has one result a weight")
        fields = [self.heads, self.unit, self.offset, self.length]
        expect(all(f is None for f in fields) or all(f is not None for f in fields),
               "a per-head part needs all of heads, unit, offset and length")
        rows, width = rows_width(self.x, "a product's activation")
        expect(is_float(self.x) or is_int(self.x, 8), "a product reads a bf16/f32 or an int8 (quantized) activation")
        part = self.part()
        if part is not None:
            heads, unit, offset, length = part
            expect(heads >= 1 and length >= 1, "a per-head part needs heads >= 1 and length >= 1")
            expect(width == heads * unit, f"activation width {width} is not heads x unit = {heads} x {unit}")
            expect(0 <= offset and offset + length <= unit,
                   f"part [{offset}, {offset + length}) does not fit a unit of {unit}")
            expect(len(self.weights) == 1, "a per-head part product has one weight")
        for i, (w, y) in enumerate(zip(self.weights, self.parts, strict=True)):
            wdims = shape(w)
            expect(len(wdims) == 2, f"weight {i} must be product rows [outputs, inputs], got {list(wdims)}")
            inputs = part[3] if part else width
            expect(wdims[1] == inputs, f"weight {i} has rows of {wdims[1]} inputs; the activation gives {inputs}")
            if part:
                expect(wdims[0] % part[0] == 0, f"weight rows {wdims[0]} do not split over {part[0]} heads")
            ydims = shape(y)
            expect(ydims == (rows, wdims[0]), f"part {i} must be [{rows}, {wdims[0]}], got {list(ydims)}")
            self.verify_epilogue(y)


@irdl_op_definition
class GatedProductOp(IRDLOperation, QuantizedEpilogue):
    """A gated pair: `silu(x @ gate^T) * (x @ up^T)` in one op."""

    name = "form.gated_product"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    gate = operand_def(TensorType)
    up = operand_def(TensorType)
    result = result_def(TensorType)
    quantize = opt_prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$x `,` $gate `,` $up attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, gate: SSAValue, up: SSAValue, result_type: Attribute | None = None):
        typ = result_type or tensor([shape(x)[0], shape(gate)[0]])
        super().__init__(operands=[x, gate, up], result_types=[typ])

    def verify_(self) -> None:
        rows, width = rows_width(self.x, "a gated pair's activation")
        expect(shape(self.gate) == shape(self.up),
               f"gate {list(shape(self.gate))} and up {list(shape(self.up))} must have the same shape")
        hidden, inputs = rows_width(self.gate, "a gated pair's gate")
        expect(inputs == width, f"gate rows take {inputs} inputs; the activation gives {width}")
        expect(shape(self.result) == (rows, hidden), f"a gated pair's result is [{rows}, {hidden}]")
        self.verify_epilogue(self.result)


@irdl_op_definition
class PartOp(IRDLOperation):
    """A copy of a part of every head's unit: y[:, h * length + j] = x[:, h * unit + offset + j]."""

    name = "form.part"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    unit = prop_def(IntegerAttr[I64])
    offset = prop_def(IntegerAttr[I64])
    length = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, heads: int, unit: int, offset: int, length: int):
        typ = tensor([shape(x)[0], heads * length], element(x))
        super().__init__(operands=[x], properties=part_props(heads, unit, offset, length), result_types=[typ])

    def verify_(self) -> None:
        rows, width = rows_width(self.x, "a part's input")
        heads, unit = self.heads.value.data, self.unit.value.data
        offset, length = self.offset.value.data, self.length.value.data
        expect(width == heads * unit, f"input width {width} is not heads x unit = {heads} x {unit}")
        expect(0 <= offset and length >= 1 and offset + length <= unit,
               f"part [{offset}, {offset + length}) does not fit a unit of {unit}")
        expect(shape(self.result) == (rows, heads * length), f"a part's result is [{rows}, {heads * length}]")


# ----------------------------------------------------------------------------------------------
# Norms and elementwise ops


# kernels that take a norm of their activation in their prologue, and "latent": an absorbed latent attention's
# query gemv, beside which the norm of its latent row rides (fold-norm-into-latent)
NORM_PROLOGUES = ("gemv", "router", "latent")
ARGMAX_EPILOGUES = ("gemv",)  # kernels that take the argmax of their output rows in their epilogue


@irdl_op_definition
class NormOp(IRDLOperation, QuantizedEpilogue):
    """RMS norm: h = x (+ residual), y = h * rsqrt(mean(h^2) + eps) * w. With a residual the op
    also returns h (the new residual stream). `prologue` is the lane's choice (the
    fold-norm-into-gemv, fold-norm-into-router or fold-norm-into-latent rule's): the norm runs in the
    prologue of its one reader's launch, that kernel named ("gemv", or "router": a mixture's), or beside
    it ("latent": in the query gemv of the latent attention reading it); it does not change the
    meaning."""

    name = "form.norm"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    weight = operand_def(TensorType)
    residual = opt_operand_def(TensorType)
    result = result_def(TensorType)
    sum = opt_result_def(TensorType)
    eps = prop_def(FloatAttr[Float64Type])
    quantize = opt_prop_def(IntegerAttr[I64])
    prologue = opt_prop_def(StringAttr)
    traits = traits_def(Pure())
    assembly_format = "$x `,` $weight (`,` $residual^)? attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, weight: SSAValue, eps: float, residual: SSAValue | None = None,
                 result_type: Attribute | None = None):
        results: list = [[result_type or x.type], [x.type] if residual is not None else []]
        super().__init__(operands=[x, weight, [residual] if residual is not None else []],
                         properties={"eps": float_prop(eps)}, result_types=results)

    def verify_(self) -> None:
        rows, width = rows_width(self.x, "a norm's input")
        expect(shape(self.weight) == (width,), f"the norm weight must be [{width}], got {list(shape(self.weight))}")
        expect(self.eps.value.data > 0, "a norm's eps must be positive")
        expect(shape(self.result) == (rows, width), f"a norm's result is [{rows}, {width}]")
        expect((self.residual is None) == (self.sum is None),
               "a norm with a residual returns the sum too, and only then")
        if self.residual is not None:
            expect(shape(self.residual) == (rows, width), "the residual must have the input's shape")
            expect(shape(self.sum) == (rows, width), "the sum must have the input's shape")
        self.verify_epilogue(self.result)
        if self.prologue is not None:
            expect(self.prologue.data in NORM_PROLOGUES,
                   f"norm prologue '{self.prologue.data}': the kernels that take a norm in their prologue are "
                   f"{', '.join(NORM_PROLOGUES)}")
            expect(self.quantize is None, "a norm in its reader's prologue has no quantize epilogue")
            expect(self.prologue.data != "latent" or self.residual is None,
                   "a norm riding beside a latent attention's query adds no residual")


class Binary(IRDLOperation, QuantizedEpilogue):
    irdl_options = (ParsePropInAttrDict(),)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    quantize = opt_prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, result_type: Attribute | None = None):
        super().__init__(operands=[lhs, rhs], result_types=[result_type or lhs.type])

    def verify_(self) -> None:
        a, b = shape(self.lhs), shape(self.rhs)
        expect(a == b, f"{self.name} operands disagree: {list(a)} and {list(b)}")
        expect(shape(self.result) == a, f"{self.name} result must be {list(a)}")
        self.verify_epilogue(self.result)


@irdl_op_definition
class AddOp(Binary):
    """a + b."""

    name = "form.add"


@irdl_op_definition
class MulOp(Binary):
    """a * b."""

    name = "form.mul"


@irdl_op_definition
class SwigluOp(Binary):
    """silu(gate) * up."""

    name = "form.swiglu"


class Unary(IRDLOperation, QuantizedEpilogue):
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    result = result_def(TensorType)
    quantize = opt_prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, result_type: Attribute | None = None):
        super().__init__(operands=[x], result_types=[result_type or x.type])

    def verify_(self) -> None:
        expect(shape(self.result) == shape(self.x), f"{self.name} result must be {list(shape(self.x))}")
        self.verify_epilogue(self.result)


@irdl_op_definition
class SiluOp(Unary):
    """x * sigmoid(x)."""

    name = "form.silu"


@irdl_op_definition
class SigmoidOp(Unary):
    """1 / (1 + exp(-x))."""

    name = "form.sigmoid"


def head_size(width: int, heads: int, what: str) -> int:
    expect(heads >= 1, f"{what}: heads must be at least 1")
    expect(width % heads == 0, f"{what}: width {width} does not split into {heads} heads")
    return width // heads


@irdl_op_definition
class L2NormOp(IRDLOperation):
    """Per-head L2 norm: each head's values times rsqrt(sum of squares + eps)."""

    name = "form.l2norm"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    eps = prop_def(FloatAttr[Float64Type])
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, heads: int, eps: float = 1e-6):
        super().__init__(operands=[x], properties={"heads": int_prop(heads), "eps": float_prop(eps)},
                         result_types=[x.type])

    def verify_(self) -> None:
        _, width = rows_width(self.x, "an l2norm's input")
        head_size(width, self.heads.value.data, "l2norm")
        expect(shape(self.result) == shape(self.x), "an l2norm's result has its input's shape")


@irdl_op_definition
class HeadNormOp(IRDLOperation):
    """Per-head RMS norm: each head's values times rsqrt(mean(x_h^2) + eps) * w, one weight of a
    head's size shared by every head (Qwen3's q_norm / k_norm)."""

    name = "form.head_norm"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    eps = prop_def(FloatAttr[Float64Type])
    traits = traits_def(Pure())
    assembly_format = "$x `,` $weight attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, weight: SSAValue, heads: int, eps: float):
        super().__init__(operands=[x, weight], properties={"heads": int_prop(heads), "eps": float_prop(eps)},
                         result_types=[x.type])

    def verify_(self) -> None:
        _, width = rows_width(self.x, "a head norm's input")
        size = head_size(width, self.heads.value.data, "head_norm")
        expect(shape(self.weight) == (size,), f"the head norm weight must be [{size}] (one head)")
        expect(self.eps.value.data > 0, "a head norm's eps must be positive")
        expect(shape(self.result) == shape(self.x), "a head norm's result has its input's shape")


@irdl_op_definition
class RopeOp(IRDLOperation):
    """Rotary embedding (rotate-half) of each head's first `rotary` values at the row's position.
    With `scaling = "llama3"` the frequencies are Llama 3.1's (transformers'
    `_compute_llama3_parameters`): `factor`, `low_freq_factor`, `high_freq_factor` and
    `original_context` (the config's original_max_position_embeddings) give all four.
    With `scaling = "yarn"` they are YaRN's (transformers' `_compute_yarn_parameters`): `factor`,
    `original_context`, `beta_fast`, `beta_slow`, `truncate` (0 or 1) and `attention_factor` (the
    resolved factor on cos and sin) give all six.

        %q = form.rope %x, %positions {heads = 4 : i64, rotary = 16 : i64, theta = 5.0e+05 : f64,
               scaling = "llama3", factor = 8.0 : f64, low_freq_factor = 1.0 : f64,
               high_freq_factor = 4.0 : f64, original_context = 8192 : i64}
        %q = form.rope %x, %positions {heads = 128 : i64, rotary = 64 : i64, theta = 1.0e+04 : f64,
               scaling = "yarn", factor = 40.0 : f64, original_context = 4096 : i64,
               beta_fast = 32.0 : f64, beta_slow = 1.0 : f64, truncate = 1 : i64,
               attention_factor = 1.0 : f64, offset = 128 : i64, interleaved = 1 : i64}
    """

    name = "form.rope"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    positions = operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    rotary = prop_def(IntegerAttr[I64])
    theta = prop_def(FloatAttr[Float64Type])
    scaling = opt_prop_def(StringAttr)
    factor = opt_prop_def(FloatAttr[Float64Type])
    low_freq_factor = opt_prop_def(FloatAttr[Float64Type])
    high_freq_factor = opt_prop_def(FloatAttr[Float64Type])
    original_context = opt_prop_def(IntegerAttr[I64])
    beta_fast = opt_prop_def(FloatAttr[Float64Type])  # yarn's
    beta_slow = opt_prop_def(FloatAttr[Float64Type])
    truncate = opt_prop_def(IntegerAttr[I64])
    attention_factor = opt_prop_def(FloatAttr[Float64Type])
    offset = opt_prop_def(IntegerAttr[I64])  # the turned values start here in each head (absent: 0)
    interleaved = opt_prop_def(IntegerAttr[I64])  # 1: pairs (2i, 2i + 1), DeepSeek's layout (absent: 0)
    traits = traits_def(Pure())
    assembly_format = "$x `,` $positions attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, positions: SSAValue, heads: int, rotary: int, theta: float,
                 llama3: tuple[float, float, float, int] | None = None, offset: int = 0, interleaved: bool = False,
                 yarn: tuple[float, int, float, float, bool, float] | None = None):
        """`llama3`: (factor, low_freq_factor, high_freq_factor, original_context), or None for
        the unscaled frequencies; `yarn`: (factor, original_context, beta_fast, beta_slow, truncate,
        attention_factor), or None (at most one of the two). `offset`: the turned values are each
        head's [offset, offset + rotary); `interleaved`: the pairs are (2i, 2i + 1) (DeepSeek), not
        (i, i + rotary/2)."""
        props: dict[str, Attribute] = {"heads": int_prop(heads), "rotary": int_prop(rotary),
                                       "theta": float_prop(theta)}
        if llama3 is not None:
            factor, low, high, original = llama3
            props.update(scaling=StringAttr("llama3"), factor=float_prop(factor), low_freq_factor=float_prop(low),
                         high_freq_factor=float_prop(high), original_context=int_prop(original))
        if yarn is not None:
            assert llama3 is None, "rope: llama3 or yarn scaling, not both"
            factor, original, fast, slow, truncate, attention = yarn
            props.update(scaling=StringAttr("yarn"), factor=float_prop(factor), original_context=int_prop(original),
                         beta_fast=float_prop(fast), beta_slow=float_prop(slow), truncate=int_prop(int(truncate)),
                         attention_factor=float_prop(attention))
        if offset:
            props["offset"] = int_prop(offset)
        if interleaved:
            props["interleaved"] = int_prop(1)
        super().__init__(operands=[x, positions], properties=props, result_types=[x.type])

    def verify_(self) -> None:
        rows, width = rows_width(self.x, "rope's input")
        size = head_size(width, self.heads.value.data, "rope")
        rotary = self.rotary.value.data
        expect(0 < rotary <= size and rotary % 2 == 0, f"rotary {rotary}: even, at most the head size {size}")
        offset = self.offset.value.data if self.offset is not None else 0
        expect(0 <= offset and offset + rotary <= size,
               f"rope offset {offset}: the turned values [{offset}, {offset + rotary}) must fit a head of {size}")
        if self.interleaved is not None:
            expect(self.interleaved.value.data in (0, 1), "rope interleaved is 0 or 1")
        expect(shape(self.positions) == (rows,), f"positions must be [{rows}]")
        expect(shape(self.result) == shape(self.x), "rope's result has its input's shape")
        given = [name for name in ROPE_SCALING_FIELDS if self.properties.get(name) is not None]
        if self.scaling is None:
            expect(not given, f"rope: {', '.join(given)} without scaling: set scaling = \"llama3\" or \"yarn\", "
                              "or drop them")
            return
        kind = self.scaling.data
        expect(kind in ROPE_SCALING, f"rope scaling '{kind}': only \"llama3\" and \"yarn\" are defined")
        missing = [name for name in ROPE_SCALING[kind] if name not in given]
        expect(not missing, f"rope scaling {kind} needs {', '.join(missing)}")
        foreign = [name for name in given if name not in ROPE_SCALING[kind]]
        expect(not foreign, f"rope scaling {kind} takes no {', '.join(foreign)}")
        assert self.factor is not None and self.original_context is not None
        expect(self.factor.value.data >= 1, f"rope scaling factor {self.factor.value.data}: at least 1")
        expect(self.original_context.value.data >= 1, "rope scaling: original_context must be at least 1")
        if kind == "llama3":
            assert self.low_freq_factor is not None and self.high_freq_factor is not None
            low, high = self.low_freq_factor.value.data, self.high_freq_factor.value.data
            expect(0 < low < high, f"rope scaling: low_freq_factor {low} must be positive and below "
                                   f"high_freq_factor {high} (the smoothing divides by their difference)")
            return
        assert self.beta_fast is not None and self.beta_slow is not None
        assert self.truncate is not None and self.attention_factor is not None
        expect(self.beta_fast.value.data > 0 and self.beta_slow.value.data > 0,
               "rope scaling yarn: beta_fast and beta_slow must be positive (rotations)")
        expect(self.truncate.value.data in (0, 1), "rope scaling yarn: truncate is 0 or 1")
        expect(self.attention_factor.value.data > 0, "rope scaling yarn: attention_factor must be positive")


ROPE_SCALING = {  # each scaling's properties, all required
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_context"),
    "yarn": ("factor", "original_context", "beta_fast", "beta_slow", "truncate", "attention_factor"),
}
ROPE_SCALING_FIELDS = tuple(dict.fromkeys(name for names in ROPE_SCALING.values() for name in names))


# ----------------------------------------------------------------------------------------------
# Linear attention: conv, gate, delta rule, gated norm, and the fused KDA op


def check_slots(op: Operation, slots: SSAValue, accepted: SSAValue | None, what: str) -> None:
    expect(is_int(slots, 32) and len(shape(slots)) in (1, 2),
           f"{what}: the slot table is [batch] or [batch, tokens] of i32")
    step = step_of(op)
    if step is not None and step.tokens.value.data > 1:
        expect(accepted is not None,
               f"{what}: a speculative step ({step.tokens.value.data} tokens) needs accepted counts")
        expect(len(shape(slots)) == 2, f"{what}: a speculative step needs a [batch, tokens] slot table")
    if accepted is not None:
        expect(is_int(accepted, 32) and len(shape(accepted)) == 1, f"{what}: accepted counts are [batch] of i32")
        expect(shape(accepted)[0] == shape(slots)[0], f"{what}: accepted counts and slots disagree on requests")


def tokens_of(op: Operation) -> int:
    step = step_of(op)
    return 1 if step is None else step.tokens.value.data


@irdl_op_definition
class ConvOp(IRDLOperation):
    """Short causal convolution through the slot table: window = the state's width-1 taps then
    the token; y = act(sum_i w[c, i] * window[i] (+ bias)); the state keeps the last taps. The op
    owns channels [offset, offset + C) of its state. Epilogue: a per-head L2 norm (norm_heads)."""

    name = "form.conv"
    x = operand_def(TensorType)
    state = operand_def(TensorType)
    weight = operand_def(TensorType)
    slots = operand_def(TensorType)
    accepted = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    offset = prop_def(IntegerAttr[I64])
    activation = prop_def(StringAttr)
    norm_heads = opt_prop_def(IntegerAttr[I64])
    norm_eps = opt_prop_def(FloatAttr[Float64Type])
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict(),)
    assembly_format = (
        "$x `,` $state `,` $weight `,` $slots (`accepted` $accepted^ `:` type($accepted))? "
        "(`bias` $bias^ `:` type($bias))? attr-dict "
        "`:` type($x) `,` type($state) `,` type($weight) `,` type($slots) `->` type($result)"
    )

    def __init__(self, x: SSAValue, state: SSAValue, weight: SSAValue, slots: SSAValue, offset: int,
                 accepted: SSAValue | None = None, bias: SSAValue | None = None, activation: str = "silu"):
        opt = lambda v: [v] if v is not None else []  # noqa: E731
        super().__init__(operands=[x, state, weight, slots, opt(accepted), opt(bias)],
                         properties={"offset": int_prop(offset), "activation": StringAttr(activation)},
                         result_types=[x.type])

    def verify_(self) -> None:
        rows, channels = rows_width(self.x, "a conv's input")
        expect(self.activation.data in ("silu", "none"), f"conv activation '{self.activation.data}': silu or none")
        wdims = shape(self.weight)
        expect(len(wdims) == 2 and wdims[0] == channels,
               f"conv weight must be [{channels}, width], got {list(wdims)}")
        width = wdims[1]
        expect(width >= 2, f"conv width {width}: at least 2")
        sdims = shape(self.state)
        expect(len(sdims) == 3, "a conv state is [slot, channels, taps]")
        offset = self.offset.value.data
        expect(0 <= offset and offset + channels <= sdims[1],
               f"channels [{offset}, {offset + channels}) do not fit a state of {sdims[1]} channels")
        q = tokens_of(self)
        taps = width - 1 + q - 1
        expect(sdims[2] == taps,
               f"conv width {width} over {q} tokens keeps {taps} taps of state; the state has {sdims[2]}")
        check_slots(self, self.slots, self.accepted, "conv")
        if self.bias is not None:
            expect(shape(self.bias) == (channels,), f"conv bias must be [{channels}]")
        if self.norm_heads is not None:
            head_size(channels, self.norm_heads.value.data, "conv's L2 norm epilogue")
            expect(self.norm_eps is not None, "conv's L2 norm epilogue needs norm_eps")
        expect(shape(self.result) == (rows, channels), f"a conv's result is [{rows}, {channels}]")


GATE_FORMS = ("lower_bound", "softplus")


@irdl_op_definition
class KdaGateOp(IRDLOperation):
    """The decay of a delta rule, per head and key (KDA) or per head (Gated DeltaNet):
    lower_bound: exp(lower_bound * sigmoid(exp(A_log) * (g + dt_bias)));
    softplus:    exp(-exp(A_log) * softplus(g + dt_bias))."""

    name = "form.kda_gate"
    irdl_options = (ParsePropInAttrDict(),)
    g = operand_def(TensorType)
    a_log = operand_def(TensorType)
    dt_bias = operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    form = prop_def(StringAttr)
    lower_bound = opt_prop_def(FloatAttr[Float64Type])
    traits = traits_def(Pure())
    assembly_format = "$g `,` $a_log `,` $dt_bias attr-dict `:` functional-type(operands, results)"

    def __init__(self, g: SSAValue, a_log: SSAValue, dt_bias: SSAValue, heads: int, form: str,
                 lower_bound: float | None = None):
        props: dict[str, Attribute] = {"heads": int_prop(heads), "form": StringAttr(form)}
        if lower_bound is not None:
            props["lower_bound"] = float_prop(lower_bound)
        super().__init__(operands=[g, a_log, dt_bias], properties=props,
                         result_types=[tensor(shape(g), Float32Type())])

    def verify_(self) -> None:
        rows, width = rows_width(self.g, "a gate's input")
        heads = self.heads.value.data
        head_size(width, heads, "kda_gate")
        form = self.form.data
        expect(form in GATE_FORMS, f"gate form '{form}': lower_bound or softplus")
        expect((form == "lower_bound") == (self.lower_bound is not None),
               "the lower_bound form needs lower_bound, and only it")
        expect(shape(self.a_log) == (heads,), f"A_log must be [{heads}]")
        expect(shape(self.dt_bias) == (width,), f"dt_bias must be [{width}]")
        expect(shape(self.result) == (rows, width), f"the decay is [{rows}, {width}]")


@irdl_op_definition
class DeltaRuleOp(IRDLOperation, QuantizedEpilogue):
    """The gated delta rule, per value head, through the slot table (state [slot, head, value,
    key], f32): S *= decay; S += beta * (v - S k) k^T; o = S (scale * q). The decay is per key
    ([rows, heads * key]: KDA) or per head ([rows, heads]: Gated DeltaNet). Value heads share key
    heads `heads / key_heads` to one."""

    name = "form.delta_rule"
    irdl_options = (ParsePropInAttrDict(),)
    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    decay = operand_def(TensorType)
    beta = operand_def(TensorType)
    state = operand_def(TensorType)
    slots = operand_def(TensorType)
    accepted = opt_operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    key_heads = prop_def(IntegerAttr[I64])
    scale = prop_def(FloatAttr[Float64Type])
    quantize = opt_prop_def(IntegerAttr[I64])
    assembly_format = (
        "$q `,` $k `,` $v `,` $decay `,` $beta `,` $state `,` $slots (`accepted` $accepted^)? attr-dict "
        "`:` functional-type(operands, results)"
    )

    def __init__(self, q, k, v, decay, beta, state, slots, heads: int, key_heads: int, scale: float,
                 accepted: SSAValue | None = None):
        props = {"heads": int_prop(heads), "key_heads": int_prop(key_heads), "scale": float_prop(scale)}
        super().__init__(operands=[q, k, v, decay, beta, state, slots, [accepted] if accepted else []],
                         properties=props, result_types=[v.type])

    def verify_(self) -> None:
        rows = same_rows("delta_rule", ("q", self.q), ("k", self.k), ("v", self.v), ("decay", self.decay),
                         ("beta", self.beta))
        heads, key_heads = self.heads.value.data, self.key_heads.value.data
        expect(key_heads >= 1 and heads % key_heads == 0,
               f"{heads} value heads do not share {key_heads} key heads evenly")
        expect(shape(self.q) == shape(self.k), "q and k must have the same shape")
        key = head_size(shape(self.q)[1], key_heads, "delta_rule q")
        value = head_size(shape(self.v)[1], heads, "delta_rule v")
        expect(shape(self.decay)[1] in (heads * key, heads),
               f"the decay is per key [{rows}, {heads * key}] or per head [{rows}, {heads}]")
        expect(shape(self.beta) == (rows, heads), f"beta must be [{rows}, {heads}]")
        sdims = shape(self.state)
        expect(len(sdims) == 4 and sdims[1:] == (heads, value, key),
               f"the state must be [slot, {heads}, {value}, {key}], got {list(sdims)}")
        check_slots(self, self.slots, self.accepted, "delta_rule")
        expect(shape(self.result) == (rows, heads * value), f"the output is [{rows}, {heads * value}]")
        self.verify_epilogue(self.result)


NORM_GATES = ("sigmoid", "swish")


@irdl_op_definition
class NormGatedOp(IRDLOperation, QuantizedEpilogue):
    """Per-head RMS norm times an activation of a gate: rms(x_h) * w * act(gate_h)."""

    name = "form.norm_gated"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    gate = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    eps = prop_def(FloatAttr[Float64Type])
    activation = prop_def(StringAttr)
    quantize = opt_prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$x `,` $gate `,` $weight attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, gate: SSAValue, weight: SSAValue, heads: int, eps: float,
                 activation: str, result_type: Attribute | None = None):
        props = {"heads": int_prop(heads), "eps": float_prop(eps), "activation": StringAttr(activation)}
        super().__init__(operands=[x, gate, weight], properties=props, result_types=[result_type or x.type])

    def verify_(self) -> None:
        rows, width = rows_width(self.x, "a gated norm's input")
        size = head_size(width, self.heads.value.data, "norm_gated")
        expect(shape(self.gate) == (rows, width), f"the gate must be [{rows}, {width}]")
        expect(shape(self.weight) == (size,), f"the norm weight must be [{size}] (one head)")
        expect(self.activation.data in NORM_GATES, f"gate activation '{self.activation.data}': sigmoid or swish")
        expect(shape(self.result) == (rows, width), f"the result is [{rows}, {width}]")
        self.verify_epilogue(self.result)


@irdl_op_definition
class KdaOp(IRDLOperation, QuantizedEpilogue):
    """KDA decode whole (the KdaSplit launch): conv of q, k, v through one conv state (channels
    [0, dim), [dim, 2 dim), [2 dim, 3 dim)), SiLU, L2 norm of q and k, the decay from f_a's
    output through f_b and the gate, beta = sigmoid(beta_raw), the delta rule, and the
    sigmoid-gated per-head RMS norm. q, k, v are the parts of one product. `gate` is the norm's
    output gate [rows, dim], or with `gate_b` ([dim, r], fold-gate-product) that product's input
    [rows, r]: the output gate is then product(gate, gate_b) (fp32 math, as the f_b projection).
    `quantize`: the result in the quantized form (fuse-quant's epilogue)."""

    name = "form.kda"
    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    conv_q = operand_def(TensorType)
    conv_k = operand_def(TensorType)
    conv_v = operand_def(TensorType)
    conv_state = operand_def(TensorType)
    f_a = operand_def(TensorType)
    f_b = operand_def(TensorType)
    a_log = operand_def(TensorType)
    dt_bias = operand_def(TensorType)
    beta = operand_def(TensorType)
    gate = operand_def(TensorType)
    gate_b = opt_operand_def(TensorType)
    norm_weight = operand_def(TensorType)
    state = operand_def(TensorType)
    slots = operand_def(TensorType)
    accepted = opt_operand_def(TensorType)
    biases = var_operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    form = prop_def(StringAttr)
    lower_bound = opt_prop_def(FloatAttr[Float64Type])
    scale = prop_def(FloatAttr[Float64Type])
    l2_eps = prop_def(FloatAttr[Float64Type])
    eps = prop_def(FloatAttr[Float64Type])
    quantize = opt_prop_def(IntegerAttr[I64])
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict(),)
    assembly_format = (
        "`qkv` `(` $q `,` $k `,` $v `)` `conv` `(` $conv_q `,` $conv_k `,` $conv_v `,` $conv_state `)` "
        "`gate` `(` $f_a `,` $f_b `,` $a_log `,` $dt_bias `)` `beta` $beta `out_gate` $gate "
        "(`through` $gate_b^ `:` type($gate_b))? `norm` $norm_weight "
        "`state` $state `slots` $slots (`accepted` $accepted^ `:` type($accepted))? "
        "(`bias` `(` $biases^ `:` type($biases) `)`)? attr-dict `:` `(` type($q) `,` type($k) `,` type($v) `)` "
        "`conv` `(` type($conv_q) `,` type($conv_k) `,` type($conv_v) `,` type($conv_state) `)` "
        "`gate` `(` type($f_a) `,` type($f_b) `,` type($a_log) `,` type($dt_bias) `)` "
        "`beta` type($beta) `out_gate` type($gate) `norm` type($norm_weight) `state` type($state) "
        "`slots` type($slots) `->` type($result)"
    )

    def verify_(self) -> None:
        heads = self.heads.value.data
        rows = same_rows("kda", ("q", self.q), ("k", self.k), ("v", self.v), ("f_a", self.f_a),
                         ("beta", self.beta), ("gate", self.gate))
        dim = shape(self.q)[1]
        size = head_size(dim, heads, "kda")
        for name, value in (("k", self.k), ("v", self.v)):
            expect(shape(value) == (rows, dim), f"kda: {name} must be [{rows}, {dim}]")
        if self.gate_b is None:
            expect(shape(self.gate) == (rows, dim), f"kda: gate must be [{rows}, {dim}]")
        else:
            gate_rank = shape(self.gate)[1]
            expect(shape(self.gate_b) == (dim, gate_rank),
                   f"kda: the output gate's product weight must be [{dim}, {gate_rank}] (its input is [{rows}, "
                   f"{gate_rank}])")
        for name, w in (("conv_q", self.conv_q), ("conv_k", self.conv_k), ("conv_v", self.conv_v)):
            expect(len(shape(w)) == 2 and shape(w)[0] == dim, f"kda: {name} must be [{dim}, width]")
        width = shape(self.conv_q)[1]
        sdims = shape(self.conv_state)
        taps = width - 1 + tokens_of(self) - 1
        expect(len(sdims) == 3 and sdims[1:] == (3 * dim, taps),
               f"kda: the conv state must be [slot, {3 * dim}, {taps}], got {list(sdims)}")
        rank = shape(self.f_a)[1]
        expect(shape(self.f_b) == (dim, rank), f"kda: f_b must be [{dim}, {rank}]")
        expect(shape(self.a_log) == (heads,), f"kda: A_log must be [{heads}]")
        expect(shape(self.dt_bias) == (dim,), f"kda: dt_bias must be [{dim}]")
        expect(shape(self.beta) == (rows, heads), f"kda: beta must be [{rows}, {heads}]")
        expect(shape(self.norm_weight) == (size,), f"kda: the norm weight must be [{size}]")
        expect(shape(self.state)[1:] == (heads, size, size), f"kda: the state must be [slot, {heads}, {size}, {size}]")
        expect(len(self.biases) in (0, 3), "kda: conv biases are none or one each for q, k and v")
        expect(all(shape(b) == (dim,) for b in self.biases), f"kda: each conv bias must be [{dim}]")
        form = self.form.data
        expect(form in GATE_FORMS, f"gate form '{form}': lower_bound or softplus")
        expect((form == "lower_bound") == (self.lower_bound is not None),
               "the lower_bound form needs lower_bound, and only it")
        check_slots(self, self.slots, self.accepted, "kda")
        expect(shape(self.result) == (rows, dim), f"kda: the result is [{rows}, {dim}]")
        self.verify_epilogue(self.result)
        expect(shape(self.result) == (rows, dim), f"kda: the output is [{rows}, {dim}]")


# ----------------------------------------------------------------------------------------------
# Attention


def check_pages(cache_dims: tuple[int, ...], pages: SSAValue, positions: SSAValue, rows: int, what: str) -> None:
    expect(is_int(pages, 32) and len(shape(pages)) == 2, f"{what}: pages are [batch, pages] of i32")
    expect(shape(positions) == (rows,), f"{what}: positions must be [{rows}]")


@irdl_op_definition
class AttentionOp(IRDLOperation, QuantizedEpilogue):
    """GQA decode over a paged KV cache: writes the row's k and v at its position (page
    pages[b, pos // page_size], offset pos % page_size), then attends over positions 0..pos
    (causal within a speculative request) with softmax(scale * q.k). `quantize`: the result in the
    quantized form (fuse-quant's epilogue)."""

    name = "form.attention"
    irdl_options = (ParsePropInAttrDict(),)
    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    k_cache = operand_def(TensorType)
    v_cache = operand_def(TensorType)
    pages = operand_def(TensorType)
    positions = operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    kv_heads = prop_def(IntegerAttr[I64])
    scale = prop_def(FloatAttr[Float64Type])
    quantize = opt_prop_def(IntegerAttr[I64])
    assembly_format = (
        "$q `,` $k `,` $v `,` $k_cache `,` $v_cache `,` $pages `,` $positions attr-dict "
        "`:` functional-type(operands, results)"
    )

    def verify_(self) -> None:
        rows = same_rows("attention", ("q", self.q), ("k", self.k), ("v", self.v))
        heads, kv_heads = self.heads.value.data, self.kv_heads.value.data
        expect(kv_heads >= 1 and heads % kv_heads == 0, f"{heads} query heads do not share {kv_heads} KV heads evenly")
        size = head_size(shape(self.q)[1], heads, "attention q")
        expect(shape(self.k)[1] == kv_heads * size, f"attention: k must be [{rows}, {kv_heads * size}]")
        vsize = head_size(shape(self.v)[1], kv_heads, "attention v")
        kc, vc = shape(self.k_cache), shape(self.v_cache)
        expect(len(kc) == 4 and kc[2:] == (kv_heads, size),
               f"the key cache must be [page, page_size, {kv_heads}, {size}]")
        expect(len(vc) == 4 and vc[:2] == kc[:2] and vc[2:] == (kv_heads, vsize),
               f"the value cache must be [{kc[0]}, {kc[1]}, {kv_heads}, {vsize}]")
        check_pages(kc, self.pages, self.positions, rows, "attention")
        expect(shape(self.result) == (rows, heads * vsize), f"attention: the output is [{rows}, {heads * vsize}]")
        self.verify_epilogue(self.result)


LATENT_PATHS = ("", "absorbed", "expanded")


@irdl_op_definition
class LatentAttentionOp(IRDLOperation):
    """Latent (MLA) decode. qr: the query projection, each head's unit its `nope` unrotated
    values then `rope` rotated ones; latent [rows, lora] and k_rope [rows, rope] are written as one
    cache row (the latent values then the shared rotated key, `lora + rope` wide); kv_b
    [heads * (nope + v), lora] expands the latent to each head's key (nope) and value halves.
    `path` is the lane's choice (absorbed or expanded); it does not change the meaning."""

    name = "form.latent_attention"
    irdl_options = (ParsePropInAttrDict(),)
    qr = operand_def(TensorType)
    latent = operand_def(TensorType)
    k_rope = operand_def(TensorType)
    cache = operand_def(TensorType)
    kv_b = operand_def(TensorType)
    pages = operand_def(TensorType)
    positions = operand_def(TensorType)
    result = result_def(TensorType)
    heads = prop_def(IntegerAttr[I64])
    nope = prop_def(IntegerAttr[I64])
    rope = prop_def(IntegerAttr[I64])
    lora = prop_def(IntegerAttr[I64])
    v = prop_def(IntegerAttr[I64])
    scale = prop_def(FloatAttr[Float64Type])
    path = opt_prop_def(StringAttr)
    assembly_format = (
        "$qr `,` $latent `,` $k_rope `,` $cache `,` $kv_b `,` $pages `,` $positions attr-dict "
        "`:` functional-type(operands, results)"
    )

    def verify_(self) -> None:
        rows = same_rows("latent_attention", ("qr", self.qr), ("latent", self.latent), ("k_rope", self.k_rope))
        heads, nope, rope = self.heads.value.data, self.nope.value.data, self.rope.value.data
        lora, v = self.lora.value.data, self.v.value.data
        expect(min(heads, nope, lora, v) >= 1 and rope >= 0, "latent_attention: sizes must be positive")
        expect(shape(self.qr)[1] == heads * (nope + rope), f"qr must be [{rows}, {heads} x ({nope} + {rope})]")
        expect(shape(self.latent)[1] == lora, f"the latent must be [{rows}, {lora}]")
        expect(shape(self.k_rope)[1] == rope, f"k_rope must be [{rows}, {rope}]")
        cdims = shape(self.cache)
        expect(len(cdims) == 3 and cdims[2] == lora + rope,
               f"the latent cache rows are {lora} + {rope} = {lora + rope} wide, got {list(cdims)}")
        expect(shape(self.kv_b) == (heads * (nope + v), lora), f"kv_b must be [{heads * (nope + v)}, {lora}]")
        check_pages(cdims, self.pages, self.positions, rows, "latent_attention")
        if self.path is not None:
            expect(self.path.data in LATENT_PATHS, f"latent path '{self.path.data}': absorbed or expanded")
        expect(shape(self.result) == (rows, heads * v), f"the output is [{rows}, {heads * v}]")


# ----------------------------------------------------------------------------------------------
# Mixture, quantize, argmax


SCORINGS = ("sigmoid", "softmax")


@irdl_op_definition
class MixtureOp(IRDLOperation):
    """A mixture of experts: router scores (sigmoid or softmax of x @ router^T), top-k chosen on
    scores + the optional correction bias, weights the chosen (uncorrected) scores, optionally
    renormalised, times routed_scaling; each expert a gated pair (gate, up [E, I, H]) then down
    [E, H, I]. Optional shared expert (gate, up [I_s, H], down [H, I_s], and an optional sigmoid
    gate [1, H]) added. With `rows`, result row r is written at row rows[r] (a scatter). With
    `groups` / `topk_groups` (grouped top-k), only the experts of the best topk_groups groups, ranked
    by the sum of each group's top-2 scores + correction, can be chosen."""

    name = "form.mixture"
    x = operand_def(TensorType)
    router = operand_def(TensorType)
    gate = operand_def(TensorType)
    up = operand_def(TensorType)
    down = operand_def(TensorType)
    correction = opt_operand_def(TensorType)
    shared = var_operand_def(TensorType)
    rows = opt_operand_def(TensorType)
    result = result_def(TensorType)
    top_k = prop_def(IntegerAttr[I64])
    scoring = prop_def(StringAttr)
    renormalize = prop_def(IntegerAttr[I64])
    routed_scaling = prop_def(FloatAttr[Float64Type])
    groups = opt_prop_def(IntegerAttr[I64])  # grouped top-k (DeepSeek-V3): experts in this many groups
    topk_groups = opt_prop_def(IntegerAttr[I64])  # the best this many groups (by their top-2 sum) kept
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict(),)
    assembly_format = (
        "$x `,` $router `,` $gate `,` $up `,` $down (`correction` $correction^ `:` type($correction))? "
        "(`shared` `(` $shared^ `:` type($shared) `)`)? (`rows` $rows^ `:` type($rows))? attr-dict "
        "`:` type($x) `,` type($router) `,` type($gate) `,` type($up) `,` type($down) `->` type($result)"
    )

    def verify_(self) -> None:
        rows, hidden = rows_width(self.x, "a mixture's input")
        rdims = shape(self.router)
        expect(len(rdims) == 2 and rdims[1] == hidden, f"the router must be [experts, {hidden}]")
        experts = rdims[0]
        gdims = shape(self.gate)
        expect(len(gdims) == 3 and gdims[0] == experts and gdims[2] == hidden,
               f"expert gates must be [{experts}, width, {hidden}], got {list(gdims)}")
        width = gdims[1]
        expect(shape(self.up) == gdims, f"expert ups must be [{experts}, {width}, {hidden}]")
        expect(shape(self.down) == (experts, hidden, width), f"expert downs must be [{experts}, {hidden}, {width}]")
        top_k = self.top_k.value.data
        expect(1 <= top_k <= experts, f"top_k {top_k}: between 1 and the {experts} experts")
        expect((self.groups is None) == (self.topk_groups is None), "grouped top-k needs both groups and topk_groups")
        if self.groups is not None and self.topk_groups is not None:
            groups, kept = self.groups.value.data, self.topk_groups.value.data
            expect(groups >= 1 and experts % groups == 0 and experts // groups >= 2,
                   f"groups {groups}: must split the {experts} experts into groups of at least 2 "
                   "(a group ranks by its top-2 sum)")
            expect(1 <= kept <= groups, f"topk_groups {kept}: between 1 and the {groups} groups")
            expect(top_k <= kept * (experts // groups),
                   f"top_k {top_k}: more than the {kept * (experts // groups)} experts of the kept groups")
        expect(self.scoring.data in SCORINGS, f"router scoring '{self.scoring.data}': sigmoid or softmax")
        expect(self.renormalize.value.data in (0, 1), "renormalize is 0 or 1")
        if self.correction is not None:
            expect(shape(self.correction) == (experts,), f"the correction bias must be [{experts}]")
        expect(len(self.shared) in (0, 3, 4), "a shared expert is gate, up, down (and an optional gate row)")
        if self.shared:
            sg, su, sd = (shape(s) for s in self.shared[:3])
            expect(len(sg) == 2 and sg[1] == hidden and su == sg and sd == (hidden, sg[0]),
                   f"the shared expert must be gate, up [width, {hidden}] and down [{hidden}, width]")
            if len(self.shared) == 4:
                expect(shape(self.shared[3]) == (1, hidden), f"the shared expert's gate row must be [1, {hidden}]")
        if self.rows is not None:
            expect(is_int(self.rows, 32) and shape(self.rows) == (rows,), f"scatter rows must be [{rows}] of i32")
        expect(shape(self.result) == (rows, hidden), f"the mixture's result is [{rows}, {hidden}]")


@irdl_op_definition
class QuantizeOp(IRDLOperation):
    """int8 activation in 32-value blocks (scale = block max / 127): one word a value, or two (a
    high word and a residual word quantizing what the high word missed)."""

    name = "form.quantize"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    result = result_def(TensorType)
    words = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, words: int):
        super().__init__(operands=[x], properties={"words": int_prop(words)},
                         result_types=[tensor(shape(x), IntegerType(8))])

    def verify_(self) -> None:
        _, width = rows_width(self.x, "quantize's input")
        words = self.words.value.data
        expect(words in (1, 2), f"quantize to {words} words: one or two int8 words a value")
        expect(width % BLOCK == 0, f"width {width} is not whole {BLOCK}-value blocks")
        expect(is_int(self.result, 8) and shape(self.result) == shape(self.x),
               "quantize's result is i8 of its input's shape")


@irdl_op_definition
class ArgmaxOp(IRDLOperation):
    """The greedy next token of each row (the first index of the largest value). `epilogue` is the
    lane's choice (the fold-argmax-into-gemv rule's): the argmax runs in the epilogue of the launch
    that writes its input, that kernel named ("gemv"); it does not change the meaning."""

    name = "form.argmax"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    result = result_def(TensorType)
    epilogue = opt_prop_def(StringAttr)
    traits = traits_def(Pure())
    assembly_format = "$x attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue):
        super().__init__(operands=[x], result_types=[tensor([shape(x)[0]], i32)])

    def verify_(self) -> None:
        rows, _ = rows_width(self.x, "argmax's input")
        expect(is_int(self.result, 32) and shape(self.result) == (rows,), f"argmax's result is [{rows}] of i32")
        if self.epilogue is not None:
            expect(self.epilogue.data in ARGMAX_EPILOGUES,
                   f"argmax epilogue '{self.epilogue.data}': the kernels that take an argmax in their epilogue are "
                   f"{', '.join(ARGMAX_EPILOGUES)}")


@irdl_op_definition
class AllReduceOp(IRDLOperation):
    """The sum of x over the `ranks` of a tensor-parallel step: each rank holds a partial sum
    (a row-parallel product's, a mixture's split within its experts); every rank gets the whole.

        %h = form.all_reduce %partial {ranks = 2 : i64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>

    `into = "norm"` (fold-all-reduce-into-norm): the norm right after it, its only reader, sums it
    in its own kernel where the runtime's engine is the one-shot (`all_reduce_norm`); the meaning
    is unchanged.
    """

    name = "form.all_reduce"
    irdl_options = (ParsePropInAttrDict(),)
    x = operand_def(TensorType)
    result = result_def(TensorType)
    ranks = prop_def(IntegerAttr[I64])
    into = opt_prop_def(StringAttr)
    assembly_format = "$x attr-dict `:` functional-type(operands, results)"

    def __init__(self, x: SSAValue, ranks: int):
        super().__init__(operands=[x], properties={"ranks": int_prop(ranks)}, result_types=[x.type])

    def verify_(self) -> None:
        rows_width(self.x, "an all_reduce's input")
        ranks = self.ranks.value.data
        expect(ranks >= 2, f"an all_reduce over {ranks} ranks: at least 2 (one rank has nothing to sum)")
        expect(is_float(self.x), "an all_reduce sums bf16 or f32 values")
        expect(self.result.type == self.x.type, "an all_reduce's result has its input's type")
        if self.into is not None:
            expect(self.into.data == "norm", f"an all_reduce into '{self.into.data}': only a norm sums it in its "
                                              "kernel")
            reader = self.next_op
            expect(isinstance(reader, NormOp) and self.result in reader.operands
                   and all(use.operation is reader for use in self.result.uses),
                   "an all_reduce into the norm after it: the next op is a norm and its only reader")


Form = Dialect(
    "form",
    [
        StepOp, ReturnOp, InputOp, WeightOp, StateOp, EmbedOp, ProductOp, GatedProductOp, PartOp,
        NormOp, AddOp, MulOp, SwigluOp, SiluOp, SigmoidOp, L2NormOp, HeadNormOp, RopeOp, ConvOp, KdaGateOp,
        DeltaRuleOp, NormGatedOp, KdaOp, AttentionOp, LatentAttentionOp, MixtureOp, QuantizeOp,
        ArgmaxOp, AllReduceOp,
    ],
)
