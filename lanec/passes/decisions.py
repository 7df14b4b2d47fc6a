"""What the rules decided: every candidate a rule considered, taken or held back, and why.

Each rule appends its decisions to the module (`lane.decisions`, an array of dictionaries), so a
lit test running one rule can check its reasons and the pipeline can read them back as a
`Decisions` list for `lanec explain`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from weakref import WeakKeyDictionary

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import BlockArgument, Operation, SSAValue

from lanec.dialects.form import ProductOp, StateOp, WeightOp

DECISIONS_ATTR = "lane.decisions"
STAGES = ("lane-before", "shared", "held-back")

# `model.layers.3.mlp...`, `blk.3.ffn...`, `h.3.attn...`: the layer a checkpoint name belongs to
LAYER = re.compile(r"(?:^|\.)(?:layers|layer|blk|h)\.(\d+)(?:\.|$)")


@dataclass(frozen=True)
class Decision:
    """One candidate fusion: the stage and rule that considered it, the op (its result's name
    and the checkpoint names it reads), the layer those names reveal, taken or held back, and
    why in words and numbers."""

    stage: str
    rule: str
    op: str
    layer: int | None
    taken: bool
    reason: str

    def attribute(self) -> DictionaryAttr:
        fields: dict = {
            "stage": StringAttr(self.stage), "rule": StringAttr(self.rule), "op": StringAttr(self.op),
            "taken": IntegerAttr(int(self.taken), IntegerType(1)), "reason": StringAttr(self.reason),
        }
        if self.layer is not None:
            fields["layer"] = IntegerAttr(self.layer, i64)
        return DictionaryAttr(fields)

    @staticmethod
    def of(attr: DictionaryAttr) -> Decision:
        text = {key: value.data for key, value in attr.data.items() if isinstance(value, StringAttr)}
        layer = attr.data.get("layer")
        return Decision(stage=text["stage"], rule=text["rule"], op=text["op"],
                        layer=None if layer is None else layer.value.data,
                        taken=bool(attr.data["taken"].value.data), reason=text["reason"])

    def as_json(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        where = f"layer {self.layer}" if self.layer is not None else "step"
        verdict = "taken" if self.taken else "held back"
        return f"{verdict:9}  {self.rule:22} {where:9} {self.op}: {self.reason}"


Decisions = list[Decision]


def record(module: ModuleOp, decisions: Decisions) -> None:
    """Append `decisions` to the module's record."""
    if not decisions:
        return
    previous = module.attributes.get(DECISIONS_ATTR)
    kept = list(previous.data) if isinstance(previous, ArrayAttr) else []
    module.attributes[DECISIONS_ATTR] = ArrayAttr(kept + [d.attribute() for d in decisions])


def decisions_of(module: ModuleOp) -> Decisions:
    attr = module.attributes.get(DECISIONS_ATTR)
    if not isinstance(attr, ArrayAttr):
        return []
    return [Decision.of(d) for d in attr.data if isinstance(d, DictionaryAttr)]


# The ops a held-back rule made when it split a fused op back, each with that decision: where the
# lowering finds no launch for one, the error names the rule and the fact that split it (held by
# the ops themselves, so a module's clone, or a later rewrite that replaces them, drops it).
_SPLIT_FROM: WeakKeyDictionary[Operation, Decision] = WeakKeyDictionary()


def note_split(decision: Decision, made: Iterable[Operation]) -> None:
    for op in made:
        _SPLIT_FROM[op] = decision


def held_back_cause(ops: Iterable[Operation]) -> str | None:
    """The held-back decision that made the first of `ops` a rule split out, as one phrase (the
    rule, the fused op, its layer and the fact), or None where no rule split them out."""
    found: list[Decision] = []
    for op in ops:
        decision = _SPLIT_FROM.get(op)
        if decision is not None and decision not in found:
            found.append(decision)
    if not found:
        return None
    first = found[0]
    where = f" in layer {first.layer}" if first.layer is not None else ""
    more = f" (and {len(found) - 1} more held back)" if len(found) > 1 else ""
    return f"{first.rule} held back {first.op}{where}: {first.reason}{more}"


def checkpoint_names(op: Operation, depth: int = 3) -> list[str]:
    """The checkpoint names (weights, states) the op reads, nearest first: its own operands, then
    their producers' operands, `depth` levels up."""
    names: list[str] = []
    frontier, seen = [op], {op}
    for _ in range(depth):
        following = []
        for node in frontier:
            for operand in node.operands:
                owner = operand.owner
                if isinstance(owner, WeightOp | StateOp):
                    names.append(owner.properties["name"].data)
                elif isinstance(owner, Operation) and owner not in seen:
                    seen.add(owner)
                    following.append(owner)
        frontier = following
    return names


def layer_of(op: Operation) -> int | None:
    for name in checkpoint_names(op):
        if match := LAYER.search(name):
            return int(match.group(1))
    return None


def short_name(name: str) -> str:
    """A checkpoint name without its layer prefix and `.weight`: `self_attn.q_proj`."""
    match = LAYER.search(name)
    tail = name[match.end():] if match else name
    return tail.removesuffix(".weight") or name


def describe(op: Operation) -> str:
    """A stable description: the kind, the result's name, and the weights it reads directly (the
    first three)."""
    kind = op.name.removeprefix("form.")
    result = next((r for r in op.results), None)
    label = f"{kind} %{result.name_hint}" if result is not None and result.name_hint else kind
    weights = [short_name(o.owner.properties["name"].data) for o in op.operands if isinstance(o.owner, WeightOp)]
    if len(weights) > 3:
        weights = weights[:3] + [f"+{len(weights) - 3} more"]
    return f"{label} ({', '.join(weights)})" if weights else label


def value_label(value: SSAValue) -> str:
    """A value as a reader knows it: its name, or the weight whose product part it is, or the
    kind of op that made it."""
    if value.name_hint:
        return f"%{value.name_hint}"
    owner = value.owner
    if isinstance(owner, WeightOp | StateOp):
        return short_name(owner.properties["name"].data)
    if isinstance(owner, ProductOp) and not isinstance(value, BlockArgument):
        weight = owner.weights[owner.parts.index(value)].owner
        if isinstance(weight, WeightOp):
            return short_name(weight.properties["name"].data)
    kind = owner.name.removeprefix("form.") if isinstance(owner, Operation) else "block"
    return f"the {kind}'s result"
