"""Products of one activation, as the two merging rules (gemv-in-parts, merge-products) find and
merge them: every product by whole rows of the activation, except a swiglu's gate and up, which
pair-gate-up takes as one gated pair instead (`unpair` undoes one). And a product in parts split
back into products of groups of its parts (`split`), as the rules that hold one back do."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from lanec.dialects.form import GatedProductOp, PartOp, ProductOp, SwigluOp
from lanec.passes.rule import (
    defined_before,
    is_plain_product,
    is_single_product,
    name_after,
    only_user,
    result_name,
    users,
)


def pair_partner(product: ProductOp) -> ProductOp | None:
    """The other half of a gate-and-up pair this product belongs to (a swiglu of two products
    of one activation, each read only there), or None."""
    if not is_single_product(product):
        return None
    swiglu = only_user(product.parts[0])
    if not isinstance(swiglu, SwigluOp) or swiglu.lhs is swiglu.rhs:
        return None
    other = swiglu.rhs if swiglu.lhs is product.parts[0] else swiglu.lhs
    partner = other.owner
    if isinstance(partner, ProductOp) and is_single_product(partner) and partner.x is product.x \
            and only_user(other) is swiglu:
        return partner
    return None


def products_of(x: SSAValue) -> list[ProductOp]:
    """The products of `x` a merge may take, in block order, each reading only weights defined
    before the first of them (where the merged product goes)."""
    found: list[ProductOp] = []
    for op in users(x):
        if isinstance(op, ProductOp) and op.x is x and is_plain_product(op) and op not in found \
                and pair_partner(op) is None:
            found.append(op)
    found.sort(key=lambda op: _position(op))
    if not found:
        return []
    first = found[0]
    return [first] + [op for op in found[1:] if all(defined_before(w, first) for w in op.weights)]


def _position(op: Operation) -> int:
    block = op.parent_block()
    assert block is not None
    return next(i for i, o in enumerate(block.ops) if o is op)


def names(products: list[ProductOp]) -> str:
    return ", ".join(result_name(r) for p in products for r in p.parts)


def split(op: ProductOp, groups: list[list[int]]) -> tuple[list[ProductOp], list[SSAValue]]:
    """`op` as one product a group of its parts (indices), its epilogue kept: the products, and
    the values that take the place of `op`'s parts (`rewriter.replace(op, *split(...))`)."""
    products, results = [], {}
    for group in groups:
        product = ProductOp(op.x, [op.weights[i] for i in group], result_types=[op.parts[i].type for i in group])
        if op.quantize is not None:
            product.quantize = op.quantize
        products.append(product)
        results.update(zip(group, product.parts, strict=True))
    return products, [results[i] for i in range(len(op.weights))]


def part_copy(op: ProductOp) -> tuple[PartOp, ProductOp]:
    """A per-head product's unfused ops: a copy of each head's part, then a per-head product that
    reads the copy whole (the product's quantize epilogue kept)."""
    heads, unit, offset, length = op.part()
    copy = PartOp(op.x, heads, unit, offset, length)
    product = ProductOp(copy.result, list(op.weights), part=(heads, length, 0, length),
                        result_types=[r.type for r in op.parts])
    if op.quantize is not None:
        product.quantize = op.quantize
    name_after(copy.result, op.parts[0], "part")
    return copy, product


def unpair(op: GatedProductOp) -> list[Operation]:
    """A gated pair's unfused ops: gate and up products, then a swiglu (with the pair's quantize
    epilogue, if any) whose result is the pair's."""
    gate, up = ProductOp(op.x, [op.gate]), ProductOp(op.x, [op.up])
    swiglu = SwigluOp(gate.parts[0], up.parts[0], result_type=op.result.type)
    if op.quantize is not None:
        swiglu.quantize = op.quantize
    name_after(gate.parts[0], op.result, "gate")
    name_after(up.parts[0], op.result, "up")
    return [gate, up, swiglu]


def merge(products: list[ProductOp], rewriter: PatternRewriter) -> ProductOp:
    """One product in parts in place of `products` (their parts in order, names kept)."""
    first = products[0]
    weights = [w for p in products for w in p.weights]
    types = [r.type for p in products for r in p.parts]
    merged = ProductOp(first.x, weights, result_types=types)
    rewriter.insert(merged, InsertPoint.before(first))
    results = iter(merged.parts)
    for product in products:
        rewriter.replace(product, [], [next(results) for _ in product.parts])
    return merged
