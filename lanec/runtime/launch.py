"""The launch ABI: what a compiled kernel takes and how it is launched, in plain Python.

A kernel's entry takes one 8-byte device pointer a tensor (`TensorParam`, in entry order) and is
launched with a `LaunchShape` (grid, block, cluster, dynamic shared memory, PDL). The kernel
classes compute both, the plan writer records them, the runtime reads them back; `check()` is
the one test of a launch that sm_90 can make, called by the lane dialect's verifier, the plan
reader and the driver alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral

MAX_BLOCK_THREADS = 1024
MAX_CLUSTER_CTAS = 16  # above 8 a cluster is non-portable: the driver opts the function in
MAX_SHARED_BYTES = 227 * 1024  # dynamic shared memory a block of sm_90 can opt in to (232448 bytes)


class LaunchError(ValueError):
    """A launch sm_90 cannot make (one line)."""


def row_major(shape) -> tuple[int, ...]:
    """Element strides of a dense row-major tensor of `shape`."""
    strides, step = [], 1
    for extent in reversed(tuple(shape)):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def _sizes(values) -> bool:
    return len(values) == 3 and all(isinstance(v, Integral) and not isinstance(v, bool) and v >= 1
                                    for v in values)


@dataclass(frozen=True)
class LaunchShape:
    """Grid, block, cluster and dynamic shared memory of one launch; `pdl` asks for
    programmatic stream serialization (the kernel calls griddepcontrol)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int] = (1, 1, 1)
    shared_bytes: int = 0
    pdl: bool = True

    def check(self) -> None:
        """Raise `LaunchError` naming the first fact sm_90 refuses: grid, block and cluster of
        three positive sizes, at most 1024 threads a block, a grid of whole clusters, at most 16
        CTAs a cluster, at most 227 KB of dynamic shared memory."""
        for what, dims in (("grid", self.grid), ("block", self.block), ("cluster", self.cluster)):
            if not _sizes(tuple(dims)):
                raise LaunchError(f"launch {what} must be three positive sizes, got {list(dims)}")
        threads = math.prod(self.block)
        if threads > MAX_BLOCK_THREADS:
            raise LaunchError(f"a block of {threads} threads: at most {MAX_BLOCK_THREADS}")
        if any(g % c for g, c in zip(self.grid, self.cluster)):
            raise LaunchError(f"grid {list(self.grid)} is not whole clusters of {list(self.cluster)}")
        ctas = math.prod(self.cluster)
        if ctas > MAX_CLUSTER_CTAS:
            raise LaunchError(f"a cluster of more than {MAX_CLUSTER_CTAS} CTAs cannot launch on sm_90: "
                              f"{list(self.cluster)} is {ctas}")
        shared = self.shared_bytes
        if not isinstance(shared, Integral) or isinstance(shared, bool) or shared < 0:
            raise LaunchError(f"{shared!r} bytes of shared memory: a size is a non-negative integer")
        if shared > MAX_SHARED_BYTES:
            raise LaunchError(f"{shared} bytes of shared memory: sm_90 has {MAX_SHARED_BYTES // 1024} KB a block")

    def to_json(self) -> dict:
        return {"grid": list(self.grid), "block": list(self.block), "cluster": list(self.cluster),
                "shared_bytes": self.shared_bytes, "pdl": self.pdl}

    @classmethod
    def from_json(cls, data: dict) -> LaunchShape:
        return cls(tuple(data["grid"]), tuple(data["block"]), tuple(data["cluster"]),
                   int(data["shared_bytes"]), bool(data["pdl"]))

    @classmethod
    def of(cls, shape) -> LaunchShape:
        """From anything with the same fields."""
        return cls(tuple(shape.grid), tuple(shape.block), tuple(shape.cluster), shape.shared_bytes, shape.pdl)


TENSOR_MAP_BYTES = 128  # a TMA tensor map (CUtensorMap), 64-byte aligned where it lies
TENSOR_MAP_SWIZZLES = (0, 32, 64, 128)  # bytes of a swizzle span (0: none)


@dataclass(frozen=True)
class TensorParam:
    """One tensor parameter of a kernel: its name, static shape, dtype name (a name of
    `lanec.runtime.dtypes`: 'bfloat16', 'float32', 'float16', 'int32', 'int8', 'uint8'), element
    strides (row-major when empty), and whether the kernel writes it.

    A `tensor_map` param ({"of": name, "box": [inner, outer], "swizzle": bytes}) is the address of
    a TMA tensor map (128 bytes, `TENSOR_MAP_BYTES`) over the 2-D param `of` of the same launch: the
    runtime encodes it for that param's window (cuTensorMapEncodeTiled: its shape, strides and
    dtype, this box and swizzle; out-of-bounds elements read as zeros) and passes the map's
    address, so a kernel issues `cp.async.bulk.tensor` with one 8-byte pointer a param like any
    other. Its shape is (128,) uint8; it binds the same window as `of`."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] = field(default=())
    written: bool = False
    tensor_map: dict | None = None

    @property
    def element_strides(self) -> tuple[int, ...]:
        """The strides, row-major ones when none are given."""
        return tuple(self.strides) or row_major(self.shape)

    def to_json(self) -> dict:
        data = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "strides": list(self.strides), "written": self.written}
        if self.tensor_map is not None:
            data["tensor_map"] = dict(self.tensor_map)
        return data

    @classmethod
    def from_json(cls, data: dict) -> TensorParam:
        return cls(data["name"], tuple(data["shape"]), data["dtype"], tuple(data["strides"]), data["written"],
                   data.get("tensor_map"))

    @classmethod
    def map_of(cls, name: str, of: str, box: tuple[int, int], swizzle: int) -> TensorParam:
        """The tensor-map param `name` over param `of` (see the class docstring)."""
        return cls(name, (TENSOR_MAP_BYTES,), "uint8", tensor_map={"of": of, "box": list(box), "swizzle": swizzle})


def tensor_map_record(source: TensorParam, param: TensorParam) -> dict:
    """What the runtime needs to encode `param`'s map over the window bound to `source`: the
    source's dtype, shape and element strides, the box and the swizzle (a plan's `Arg.map`)."""
    return {"dtype": source.dtype, "shape": list(source.shape), "strides": list(source.element_strides),
            "box": list(param.tensor_map["box"]), "swizzle": int(param.tensor_map["swizzle"])}


def tensor_map_problems(record: dict, itemsize: int) -> list[str]:
    """Why a map `record` (`tensor_map_record`'s) cannot be encoded for TMA (none: it can): a 2-D
    tensor, its row pitch and the box's inner bytes multiples of 16, a box of 1-256 a side whose
    inner bytes fit the swizzle span."""
    found = []
    shape, strides, box, swizzle = record["shape"], record["strides"], record["box"], record["swizzle"]
    if len(shape) != 2 or len(strides) != 2 or len(box) != 2:
        found.append(f"a tensor map here is 2-D; got shape {shape}, strides {strides}, box {box}")
        return found
    if strides[1] != 1:
        found.append(f"its rows must be contiguous (inner stride 1, got {strides[1]})")
    if (strides[0] * itemsize) % 16:
        found.append(f"a row pitch of {strides[0] * itemsize} bytes is not a multiple of 16")
    if not all(isinstance(b, int) and 1 <= b <= 256 for b in box):
        found.append(f"box {box}: each side is 1-256 elements")
    elif (box[0] * itemsize) % 16:
        found.append(f"the box's inner {box[0] * itemsize} bytes are not a multiple of 16")
    if swizzle not in TENSOR_MAP_SWIZZLES:
        found.append(f"swizzle {swizzle}: one of {', '.join(map(str, TENSOR_MAP_SWIZZLES))} bytes")
    elif swizzle and box[0] * itemsize > swizzle:
        found.append(f"the box's inner {box[0] * itemsize} bytes exceed the {swizzle}-byte swizzle span")
    return found
