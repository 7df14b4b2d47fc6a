"""A kernel's static specialization as `lane.launch` attributes, and back.

A specialization is a dict of plain values (bool, int, float, str, tuples of them, None, and
dicts of them: a schedule's named fields); a launch
records it as a dictionary of attributes, which the plan writer and the cute-dsl target read back.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute

from lanec.dialects import lane


def to_attr(value) -> Attribute:
    if isinstance(value, bool):
        return BoolAttr(value, 1)
    if isinstance(value, int):
        return IntegerAttr(value, i64)
    if isinstance(value, float):
        return FloatAttr(value, Float64Type())
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, (tuple, list)):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return DenseArrayBase.from_list(i64, list(value))
        return ArrayAttr([to_attr(v) for v in value])
    if value is None:
        return ArrayAttr([])
    if isinstance(value, dict):
        return DictionaryAttr({k: to_attr(v) for k, v in value.items()})
    raise TypeError(f"cannot record {value!r} in a kernel specialization")


def from_attr(attr: Attribute):
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return bool(value) if attr.type == IntegerType(1) else value  # i1: a flag
    if isinstance(attr, FloatAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, DenseArrayBase):
        return tuple(attr.get_values())
    if isinstance(attr, ArrayAttr):
        return tuple(from_attr(a) for a in attr.data) or None
    if isinstance(attr, DictionaryAttr):
        return {k: from_attr(v) for k, v in attr.data.items()}
    raise TypeError(f"cannot read {attr} as a kernel specialization")


def spec_attrs(spec: dict) -> dict[str, Attribute]:
    """A specialization as a launch records it."""
    return {k: to_attr(v) for k, v in spec.items()}


def spec_of(launch: lane.LaunchOp) -> dict:
    """The specialization a launch records."""
    return {k: from_attr(v) for k, v in launch.spec.data.items()}
