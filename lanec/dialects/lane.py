"""The `lane` dialect: a decode step as the CUDA lane runs it, one `lane.launch` per kernel.

    lane.step batch 1 tokens 1 {
      %x = lane.buffer {name = "x", role = "input", source = "tokens"} : memref<1xi32>
      %t = lane.buffer {name = "embed", role = "weight", sources = ["embed"], transforms = []} : memref<32x16xbf16>
      %h = lane.buffer {name = "h", role = "activation"} : memref<1x16xbf16>
      lane.launch "embed" (%x, %t, %h) {spec = {...}, grid = array<i64: 1, 1, 1>, block = array<i64: 128, 1, 1>,
        cluster = array<i64: 1, 1, 1>, shared_bytes = 0 : i64, pdl = true}
        : memref<1xi32>, memref<32x16xbf16>, memref<1x16xbf16>
      lane.return %h : memref<1x16xbf16>
    }

Buffers are memrefs: their shape and element type are the buffer table's; a `lane.view` is a
strided window of a buffer (a part of a product in parts). A launch's operands are its kernel's
tensor parameters in entry order; its properties are the launch facts computed by the kernel
class (`launch()`), so the plan writer and the kernel cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Dialect, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import HasParent, IsTerminator
from xdsl.utils.exceptions import VerifyException

from lanec.runtime.launch import LaunchError, LaunchShape
from lanec.runtime.plan import ROLES, TRANSFORMS


def triple(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


@irdl_op_definition
class StepOp(IRDLOperation):
    """The lane's decode step: buffers, then launches in order, then the outputs."""

    name = "lane.step"
    batch = prop_def(IntegerAttr[I64])
    tokens = prop_def(IntegerAttr[I64])
    body = region_def("single_block")
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`batch` $batch `tokens` $tokens attr-dict-with-keyword $body"

    def __init__(self, batch: int, tokens: int, body: Region):
        super().__init__(properties={"batch": IntegerAttr(batch, i64), "tokens": IntegerAttr(tokens, i64)},
                         regions=[body])


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """The step's outputs (buffers the host reads back)."""

    name = "lane.return"
    outputs = var_operand_def(MemRefType)
    traits = traits_def(IsTerminator(), HasParent(StepOp))
    assembly_format = "($outputs^ `:` type($outputs))? attr-dict"

    def __init__(self, outputs: Sequence[SSAValue]):
        super().__init__(operands=[outputs])


@irdl_op_definition
class BufferOp(IRDLOperation):
    """One device buffer. A weight names the form weights it is made of (`sources`) and the
    chain of transforms applied once at load (`concatenate` rows, `stack` experts, `transpose`,
    `interleave` gate/up tiles, `reshape`, `slice` (a latent attention's kv_b halves),
    `quantize_q8_0`), each a dictionary with its `kind`; an input names its role (`source`); a
    state names its form state."""

    name = "lane.buffer"
    buffer_name = prop_def(StringAttr, prop_name="name")
    role = prop_def(StringAttr)
    source = opt_prop_def(StringAttr)
    sources = opt_prop_def(ArrayAttr[StringAttr])
    transforms = opt_prop_def(ArrayAttr[DictionaryAttr])
    result = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, name: str, role: str, typ: MemRefType, *, source: str | None = None,
                 sources: Sequence[str] = (), transforms: Sequence[dict[str, Attribute]] = ()):
        props: dict[str, Attribute] = {"name": StringAttr(name), "role": StringAttr(role)}
        if source is not None:
            props["source"] = StringAttr(source)
        if sources:
            props["sources"] = ArrayAttr([StringAttr(s) for s in sources])
            props["transforms"] = ArrayAttr([DictionaryAttr(t) for t in transforms])
        super().__init__(properties=props, result_types=[typ])

    def verify_(self) -> None:
        role = self.role.data
        if role not in ROLES:
            raise VerifyException(f"buffer role '{role}': one of {', '.join(ROLES)}")
        if role == "weight" and (self.sources is None or self.transforms is None):
            raise VerifyException(f"weight buffer '{self.buffer_name.data}' needs its sources and transforms")
        for transform in self.transforms or []:
            kind = transform.data.get("kind")
            if not isinstance(kind, StringAttr) or kind.data not in TRANSFORMS:
                raise VerifyException(f"a transform's kind must be one of {', '.join(TRANSFORMS)}")
        if role in ("input", "state") and self.source is None:
            raise VerifyException(f"{role} buffer '{self.buffer_name.data}' needs its source")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """A strided window of a buffer: `offset` elements in, with the result type's shape and
    strides (e.g. one part of a product in parts: rows of the part at the whole row's pitch)."""

    name = "lane.view"
    base = operand_def(MemRefType)
    offset = prop_def(IntegerAttr[I64])
    strides = prop_def(DenseArrayBase)
    result = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$base attr-dict `:` type($base) `->` type($result)"

    def __init__(self, base: SSAValue, offset: int, shape: Sequence[int], strides: Sequence[int]):
        assert isinstance(base.type, MemRefType)
        typ = MemRefType(base.type.element_type, list(shape))
        super().__init__(operands=[base], properties={"offset": IntegerAttr(offset, i64),
                                                     "strides": triple(strides)}, result_types=[typ])

    def verify_(self) -> None:
        assert isinstance(self.base.type, MemRefType) and isinstance(self.result.type, MemRefType)
        if self.base.type.element_type != self.result.type.element_type:
            raise VerifyException("a view keeps its buffer's element type")
        shape = self.result.type.get_shape()
        strides = self.strides.get_values()
        if len(strides) != len(shape):
            raise VerifyException(f"a view of rank {len(shape)} needs {len(shape)} strides")
        last = self.offset.value.data + sum((n - 1) * s for n, s in zip(shape, strides))
        size = 1
        for n in self.base.type.get_shape():
            size *= n
        if self.offset.value.data < 0 or last >= size:
            raise VerifyException(f"view reaches element {last}; its buffer holds {size}")


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """One kernel launch: the kernel class, its static specialization, and its launch facts."""

    name = "lane.launch"
    kernel = prop_def(StringAttr)
    spec = prop_def(DictionaryAttr)
    grid = prop_def(DenseArrayBase)
    block = prop_def(DenseArrayBase)
    cluster = prop_def(DenseArrayBase)
    shared_bytes = prop_def(IntegerAttr[I64])
    pdl = prop_def(BoolAttr)
    args = var_operand_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$kernel `(` $args `)` attr-dict `:` type($args)"

    def __init__(self, kernel: str, spec: dict[str, Attribute], args: Sequence[SSAValue],
                 grid: Sequence[int], block: Sequence[int], cluster: Sequence[int], shared_bytes: int,
                 pdl: bool):
        props = {
            "kernel": StringAttr(kernel), "spec": DictionaryAttr(spec), "grid": triple(grid),
            "block": triple(block), "cluster": triple(cluster),
            "shared_bytes": IntegerAttr(shared_bytes, i64), "pdl": BoolAttr(pdl, 1),
        }
        super().__init__(operands=[args], properties=props)

    @property
    def shape(self) -> LaunchShape:
        """The launch as the runtime makes it."""
        return LaunchShape(tuple(self.grid.get_values()), tuple(self.block.get_values()),
                           tuple(self.cluster.get_values()), self.shared_bytes.value.data, bool(self.pdl.value.data))

    def verify_(self) -> None:
        try:
            self.shape.check()
        except LaunchError as exc:
            raise VerifyException(str(exc)) from None


@irdl_op_definition
class AllReduceOp(IRDLOperation):
    """The sum of `source` over the `ranks` of a tensor-parallel step into `target` (NCCL's
    all-reduce on the step's stream, in order with the launches; `target` may be `source`).
    The launch after it never relies on PDL across it: the lowering launches it with `pdl` off.

        lane.all_reduce %partial, %sum {ranks = 2 : i64} : memref<1x64xbf16>, memref<1x64xbf16>

    `into = "rmsnorm"`: the next launch, an rmsnorm reading `target`, and this all-reduce are one
    `all_reduce_norm` launch where the runtime takes the one-shot engine (the plan carries it).
    """

    name = "lane.all_reduce"
    source = operand_def(MemRefType)
    target = operand_def(MemRefType)
    ranks = prop_def(IntegerAttr[I64])
    into = opt_prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source `,` $target attr-dict `:` type($source) `,` type($target)"

    def __init__(self, source: SSAValue, target: SSAValue, ranks: int, into: str | None = None):
        super().__init__(operands=[source, target], properties={"ranks": IntegerAttr(ranks, i64),
                                                                **({"into": StringAttr(into)} if into else {})})

    def verify_(self) -> None:
        assert isinstance(self.source.type, MemRefType) and isinstance(self.target.type, MemRefType)
        if self.ranks.value.data < 2:
            raise VerifyException(f"an all_reduce over {self.ranks.value.data} ranks: at least 2")
        if self.source.type != self.target.type:
            raise VerifyException("an all_reduce's target has its source's shape and element type")
        if str(self.source.type.element_type) not in ("bf16", "f32"):
            raise VerifyException(f"an all_reduce sums bf16 or f32 values, not {self.source.type.element_type}")
        if self.into is not None and self.into.data != "rmsnorm":
            raise VerifyException(f"an all_reduce into '{self.into.data}': only the rmsnorm launch after it takes one")


Lane = Dialect("lane", [StepOp, ReturnOp, BufferOp, ViewOp, LaunchOp, AllReduceOp])
