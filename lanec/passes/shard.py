"""shard: one rank's step of a tensor-parallel decode over `ranks` GPUs (`lanec compile --tp N`).

It runs on the form as imported (before the rules, which then fuse each rank's step as they fuse
a whole one) and splits it the usual way (Megatron's, as vLLM serves these models):

- a product of one whole activation feeding heads is column-parallel (its rows split: q, k, v,
  gate and up, KDA's b, f_b and g_b, Gated DeltaNet's qkvz and ba, a latent attention's q);
- a product of a split activation is row-parallel (its inputs split: o_proj, down, out_proj),
  then `form.all_reduce` sums the ranks' partial results;
- a product of a whole activation into a whole one stays replicated (the LoRA products f_a, g_a,
  q_a and kv_a, and lm_head: every rank computes all the logits, so argmax needs no gather);
- heads split across ranks (attention, latent attention, KDA and Gated DeltaNet, their convs,
  norms, gates and states); a latent attention's latent cache is replicated; kv heads split where
  kv_heads divides by the ranks, else each rank holds the one kv head its query heads read;
- a mixture splits within its experts (a rank holds a slice of every expert's width, and of the
  shared expert's), its router replicated, then `form.all_reduce`;
- the embedding and every norm of the hidden width are replicated.

A rank's weights and states are named slices of the whole model's (their `shard` property,
`lanec/interp/tp.py`'s `Shard`). A head count or width that does not divide is a one-line error
naming the op's tensors and the count. The pass decides backward (what each reader needs of a
value) and then rewrites forward; `lane.sharding` on the module keeps one line an op for
`lanec explain`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import DiagnosticException

from lanec.dialects import form
from lanec.dialects.form import int_prop, shape
from lanec.interp.tp import Shard
from lanec.passes.decisions import checkpoint_names, describe, layer_of, short_name, value_label

SHARDING_ATTR = "lane.sharding"

# ops whose result may be split by heads or width: a product reading one is row-parallel
SPLITTABLE = (form.AttentionOp, form.LatentAttentionOp, form.DeltaRuleOp, form.NormGatedOp, form.ConvOp,
              form.L2NormOp, form.HeadNormOp, form.RopeOp, form.PartOp, form.KdaGateOp, form.SwigluOp,
              form.MulOp, form.SiluOp, form.SigmoidOp, form.GatedProductOp)
FOLLOWERS = (form.AddOp, form.MulOp, form.SwigluOp, form.SiluOp, form.SigmoidOp)  # elementwise
HEADED = (form.PartOp, form.L2NormOp, form.HeadNormOp, form.RopeOp)  # per head, one input
LEAVES = (form.InputOp, form.WeightOp, form.StateOp)


@dataclass(frozen=True)
class Cut:
    """How a weight or state splits: along `dim` into `parts` (of each segment)."""

    dim: int
    parts: int
    segments: tuple[int, ...] = ()


@dataclass
class Sharding:
    """What each op of the step does under `ranks`: the parts each activation is split into
    (absent: whole), each weight's and state's cut, the head counts that change, the ops whose
    partial result an all_reduce sums, and a line an op for explain."""

    ranks: int
    parts: dict[SSAValue, int] = field(default_factory=dict)
    cuts: dict[SSAValue, Cut] = field(default_factory=dict)
    props: dict[Operation, dict[str, int]] = field(default_factory=dict)
    reduced: set[Operation] = field(default_factory=set)
    how: dict[Operation, str] = field(default_factory=dict)
    undivided: dict[Operation, str] = field(default_factory=dict)  # an op's count that does not divide

    # -- what readers need ---------------------------------------------------------------------

    def refuse(self, op: Operation, words: str) -> None:
        layer = layer_of(op)
        where = f" in layer {layer}" if layer is not None else ""
        raise DiagnosticException(f"--tp {self.ranks}: {label(op)}{where}: {words}")

    def of(self, value: SSAValue) -> int:
        return self.parts.get(value, 1)

    def want(self, value: SSAValue, parts: int, reader: Operation) -> None:
        """`reader` reads `value` split into `parts` (1: whole)."""
        if isinstance(value.owner, LEAVES):
            if parts > 1:
                self.refuse(reader, f"reads {value_label(value)} split, but it is a step input")
            return
        known = self.parts.get(value)
        if known is not None and known != parts:
            self.refuse(reader, f"reads {value_label(value)} in {parts} parts; another reader needs {known}")
        self.parts[value] = parts

    def divides(self, op: Operation, count: int, what: str, parts: int) -> None:
        """Note a count that does not divide (the walk goes on, so the error can name the first op)."""
        if count % parts:
            self.undivided.setdefault(op, f"{count} {what} do not divide by {parts}")

    def cut(self, value: SSAValue, cut: Cut, reader: Operation) -> None:
        if cut.parts == 1:
            return
        known = self.cuts.get(value)
        if known is not None and known != cut:
            self.refuse(reader, f"{value_label(value)} is cut one way here and another elsewhere")
        self.cuts[value] = cut

    def result_parts(self, op: Operation) -> int:
        counts = {self.of(r) for r in op.results}
        if len(counts) != 1:
            self.refuse(op, "its results are read in different parts")
        return counts.pop()

    # -- one op at a time, readers first -----------------------------------------------------

    def decide(self, op: Operation) -> None:
        if isinstance(op, LEAVES):
            return
        for kind, rule in DECIDE.items():
            if isinstance(op, kind):
                rule(self, op)
                return
        self.refuse(op, "no sharding for this op: shard the imported form (before the rules fuse it)")

    def whole(self, op: Operation) -> None:
        """Computes the whole width: its results and operands are whole."""
        if op.results and self.result_parts(op) != 1:
            self.refuse(op, "computes the whole width, but its reader needs it split")
        for value in op.operands:
            self.want(value, 1, op)
        self.how[op] = "replicated"

    def follow(self, op: Operation) -> None:
        parts = self.result_parts(op)
        for value in op.operands:
            self.want(value, parts, op)
        self.how[op] = f"split in {parts}, as its operands" if parts > 1 else "replicated"

    def headed(self, op: Operation, *, heads: str = "heads", activations: tuple[str, ...] = ("x",),
               weights: tuple[tuple[str, int], ...] = ()) -> int:
        """A per-head op: its activations split as its result, its `heads` divided, its weights
        (operand name, dimension) cut alike. Returns the parts."""
        parts = self.result_parts(op)
        count = op.properties[heads].value.data
        self.divides(op, count, "heads", parts)
        for name in activations:
            self.want(getattr(op, name), parts, op)
        for name, dim in weights:
            self.cut(getattr(op, name), Cut(dim, parts), op)
        if parts > 1:
            self.props[op] = {heads: count // parts}
            self.how[op] = f"heads split: {count // parts} of {count} a rank"
        else:
            self.how[op] = "replicated"
        return parts

    def product(self, op: form.ProductOp | form.GatedProductOp) -> None:
        """Column-parallel where a reader needs a result split (a merged product's other parts
        stay whole), row-parallel where the activation can be split, else replicated."""
        if (isinstance(op, form.ProductOp) and op.part() is not None) or op.quantize is not None:
            self.refuse(op, "a fused product: shard the imported form (before the rules)")
        pairs = [(w, self.of(r)) for w, r in zip(op.weights, op.parts, strict=True)] \
            if isinstance(op, form.ProductOp) else [(op.gate, self.of(op.result)), (op.up, self.of(op.result))]
        if any(parts > 1 for _, parts in pairs):
            for w, parts in pairs:
                self.divides(op, shape(w)[0], "outputs", parts)
                self.cut(w, Cut(0, parts), op)
            self.want(op.x, 1, op)
            self.how[op] = "column-parallel: " + ", ".join(
                f"{shape(w)[0] // parts} of {shape(w)[0]}" if parts > 1 else f"all {shape(w)[0]}"
                for w, parts in pairs) + " outputs a rank"
        elif isinstance(op, form.ProductOp) and isinstance(op.x.owner, SPLITTABLE):
            inputs = shape(op.x)[1]
            self.divides(op, inputs, "inputs", self.ranks)
            for w, _ in pairs:
                self.cut(w, Cut(1, self.ranks), op)
            self.want(op.x, self.ranks, op)
            self.reduced.add(op)
            self.how[op] = f"row-parallel: {inputs // self.ranks} of {inputs} inputs a rank, then all_reduce"
        else:
            self.want(op.x, 1, op)
            self.how[op] = "replicated"

    def conv(self, op: form.ConvOp) -> None:
        parts = self.result_parts(op)
        channels = shape(op.x)[1]
        self.divides(op, channels, "channels", parts)
        self.want(op.x, parts, op)
        for w in (op.weight, op.bias):
            if w is not None:
                self.cut(w, Cut(0, parts), op)
        segments = conv_segments(op.state)
        if segments is None:
            self.refuse(op, f"the convs of {value_label(op.state)} do not cover its channels one after another")
        self.cut(op.state, Cut(1, parts, segments), op)
        if parts > 1:
            props = {"offset": op.offset.value.data // parts}
            if op.norm_heads is not None:
                self.divides(op, op.norm_heads.value.data, "heads", parts)
                props["norm_heads"] = op.norm_heads.value.data // parts
            self.props[op] = props
            self.how[op] = f"channels split: {channels // parts} of {channels} a rank"
        else:
            self.how[op] = "replicated"

    def delta_rule(self, op: form.DeltaRuleOp) -> None:
        parts = self.headed(op, activations=("q", "k", "v", "decay", "beta"), weights=(("state", 1),))
        key_heads = op.key_heads.value.data
        self.divides(op, key_heads, "key heads", parts)
        if parts > 1:
            self.props[op]["key_heads"] = key_heads // parts
            self.how[op] += f"; key heads {key_heads // parts} of {key_heads}"

    def attention(self, op: form.AttentionOp) -> None:
        parts = self.headed(op, activations=("q",))
        kv = op.kv_heads.value.data
        if kv % parts == 0:
            kv_parts = parts
        elif parts % kv == 0:
            kv_parts = kv  # each rank holds the one kv head its query heads read
        else:
            self.undivided.setdefault(op, f"{kv} kv heads do not divide by {parts}, nor {parts} by them")
            kv_parts = 1
        for name in ("k", "v"):
            self.want(getattr(op, name), kv_parts, op)
        for cache in (op.k_cache, op.v_cache):
            self.cut(cache, Cut(2, kv_parts), op)
        if parts > 1:
            self.props[op]["kv_heads"] = kv // kv_parts
            kept = "split" if kv_parts == parts else f"replicated ({parts // kv} ranks a kv head)"
            self.how[op] += f"; kv heads {kept}: {kv // kv_parts} of {kv} a rank"

    def latent_attention(self, op: form.LatentAttentionOp) -> None:
        parts = self.headed(op, activations=("qr",), weights=(("kv_b", 0),))
        self.want(op.latent, 1, op)
        self.want(op.k_rope, 1, op)
        if parts > 1:
            self.how[op] += "; the latent cache replicated"

    def mixture(self, op: form.MixtureOp) -> None:
        if self.result_parts(op) != 1:
            self.refuse(op, "a mixture's result is summed whole; its reader needs it split")
        width = shape(op.gate)[1]
        self.divides(op, width, "expert width (moe_intermediate_size)", self.ranks)
        self.want(op.x, 1, op)
        for w, dim in ((op.gate, 1), (op.up, 1), (op.down, 2)):
            self.cut(w, Cut(dim, self.ranks), op)
        shared = ""
        if op.shared:
            shared_width = shape(op.shared[0])[0]
            self.divides(op, shared_width, "shared expert width", self.ranks)
            for w, dim in zip(op.shared[:3], (0, 0, 1), strict=True):
                self.cut(w, Cut(dim, self.ranks), op)
            shared = f", the shared expert's {shared_width // self.ranks} of {shared_width}"
        self.reduced.add(op)
        self.how[op] = (f"split within experts: {width // self.ranks} of each expert's {width} width a rank"
                        f"{shared}, the router replicated, then all_reduce")

    # -- the rank's step -----------------------------------------------------------------------

    def rewrite(self, step: form.StepOp, rank: int) -> list[str]:
        """Rewrite the step into rank `rank`'s; returns the explain lines."""
        lines: list[str] = []
        for op in list(step.body.block.ops):
            if isinstance(op, form.ReturnOp | form.InputOp):
                continue
            if isinstance(op, form.WeightOp | form.StateOp):
                cut = self.cuts.get(op.result)
                if cut is not None:
                    shard = Shard.of_rank(cut.dim, cut.parts, rank, self.ranks, cut.segments)
                    dims = shard.cut(shape(op.result), value_label(op.result))
                    self.replace(op, [TensorType(form.element(op.result), dims)], {"shard": StringAttr(shard.text)})
                continue
            where = f"layer {layer_of(op)}" if layer_of(op) is not None else "step"
            lines.append(f"{where:9} {label(op)}: {self.how[op]}")
            types = [split_type(r, self.of(r)) for r in op.results]
            props = {name: int_prop(n) for name, n in self.props.get(op, {}).items()}
            if op in self.reduced:
                lines.append(f"{where:9} all_reduce {value_label(op.results[0])}: the sum over {self.ranks} ranks, "
                             + self.engine(op.results[0]))
            self.replace(op, types, props, reduce=op in self.reduced)
        return lines

    def engine(self, value: SSAValue) -> str:
        """Which all-reduce the plan carries for `value` (a rank's part, summed whole) and why."""
        from lanec.codegen.lower import dtype_name
        from lanec.runtime.peer import PeerLayout

        layout = PeerLayout(math.prod(shape(value)), dtype_name(form.element(value)), self.ranks)
        problems = layout.problems()
        if problems:
            return f"NCCL's ({'; '.join(problems)})"
        return (f"the one-shot kernel ({layout.bytes} bytes read from every rank's memory; NCCL's beside it, "
                "LANEC_ALL_REDUCE picks)")

    def replace(self, op: Operation, types: list, props: dict, reduce: bool = False) -> None:
        new = type(op).create(operands=list(op.operands), result_types=types,
                              properties={**op.properties, **props}, attributes=dict(op.attributes))
        Rewriter.insert_op(new, InsertPoint.before(op))
        for old, made in zip(op.results, new.results, strict=True):
            made.name_hint = old.name_hint
            if reduce:
                total = form.AllReduceOp(made, self.ranks)
                Rewriter.insert_op(total, InsertPoint.after(new))
                total.result.name_hint = old.name_hint
                made.name_hint = f"{old.name_hint}_partial" if old.name_hint else None
                made = total.result
            old.replace_all_uses_with(made)
        Rewriter.erase_op(op)


DECIDE: dict[type | tuple[type, ...], Callable[[Sharding, Operation], None]] = {
    (form.ProductOp, form.GatedProductOp): Sharding.product,
    form.ConvOp: Sharding.conv,
    form.DeltaRuleOp: Sharding.delta_rule,
    form.AttentionOp: Sharding.attention,
    form.LatentAttentionOp: Sharding.latent_attention,
    form.MixtureOp: Sharding.mixture,
    form.KdaGateOp: lambda s, op: s.headed(op, activations=("g",), weights=(("a_log", 0), ("dt_bias", 0))),
    form.NormGatedOp: lambda s, op: s.headed(op, activations=("x", "gate")),
    HEADED: Sharding.headed,
    FOLLOWERS: Sharding.follow,
    (form.EmbedOp, form.NormOp, form.ArgmaxOp, form.ReturnOp): Sharding.whole,
}


def label(op: Operation) -> str:
    """The op as explain describes it; one that reads no weight, by the nearest tensor it derives from."""
    text = describe(op)
    names = checkpoint_names(op)
    if "(" in text or not names:
        return text
    return f"{text} (of {short_name(names[0])})"


def split_type(value: SSAValue, parts: int) -> TensorType:
    dims = list(shape(value))
    dims[-1] //= parts
    return TensorType(form.element(value), dims)


def conv_segments(state: SSAValue) -> tuple[int, ...] | None:
    """The widths of the convs reading a conv state, in channel order, where they cover its
    channels one after another (None where they do not)."""
    spans = sorted((use.operation.offset.value.data, shape(use.operation.x)[1]) for use in state.uses
                   if isinstance(use.operation, form.ConvOp))
    start = 0
    for offset, width in spans:
        if offset != start:
            return None
        start += width
    return tuple(width for _, width in spans) if start == shape(state)[1] else None


def sharding_of(step: form.StepOp, ranks: int) -> Sharding:
    """Decide every op's split, readers first; then an add of two partial sums (a mixture and its
    shared expert) adds the partials and reduces once."""
    sharding = Sharding(ranks)
    for op in reversed(list(step.body.block.ops)):
        sharding.decide(op)
    if sharding.undivided:
        first = next(op for op in step.body.block.ops if op in sharding.undivided)
        more = len(sharding.undivided) - 1
        sharding.refuse(first, sharding.undivided[first] + (f" (and {more} more ops)" if more else ""))
    for op in step.body.block.ops:
        partials = [v.owner for v in op.operands if v.owner in sharding.reduced and len(list(v.uses)) == 1]
        if isinstance(op, form.AddOp) and len(partials) == 2:
            sharding.reduced.difference_update(partials)
            sharding.reduced.add(op)
            for partial in partials:
                sharding.how[partial] = sharding.how[partial].replace(", then all_reduce", ", a partial sum")
            sharding.how[op] = "adds the two partial sums, then all_reduce"
    return sharding


@dataclass(frozen=True)
class ShardPass(ModulePass):
    """`lanec opt -p 'shard{ranks=2 rank=0}'`: the form step of rank `rank` of `ranks`."""

    name = "shard"
    ranks: int = 2
    rank: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.ranks < 2:
            raise DiagnosticException(f"--tp {self.ranks}: tensor parallel needs at least 2 ranks")
        if not 0 <= self.rank < self.ranks:
            raise DiagnosticException(f"rank {self.rank}: not one of the {self.ranks} ranks")
        steps = [s for s in op.ops if isinstance(s, form.StepOp)]
        if len(steps) != 1:
            raise DiagnosticException(f"shard: a module holds one form.step, got {len(steps)}")
        lines = sharding_of(steps[0], self.ranks).rewrite(steps[0], self.rank)
        op.attributes[SHARDING_ATTR] = ArrayAttr([StringAttr(line) for line in lines])


def sharding_lines(module: ModuleOp) -> list[str]:
    attr = module.attributes.get(SHARDING_ATTR)
    return [line.data for line in attr.data] if isinstance(attr, ArrayAttr) else []
