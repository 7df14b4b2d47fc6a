"""What every kernel class shares: the launch facts (computed in plain Python, used by both the
kernel's `__call__` and the plan writer, so they cannot drift) and the tensor parameters. Plain
Python only: the runtime reads these too, on a machine without CuTe DSL."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LaunchShape:
    """Grid, block, cluster and dynamic shared memory of one launch; `pdl` asks for
    programmatic stream serialization (the kernel calls griddepcontrol)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int] = (1, 1, 1)
    shared_bytes: int = 0
    pdl: bool = True

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


@dataclass(frozen=True)
class TensorParam:
    """One tensor parameter of a kernel: its name, static shape, dtype name (numpy spelling:
    'bfloat16', 'float32', 'int32', 'int8', 'uint8', 'float16'), element strides (row-major
    when empty), and whether the kernel writes it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] = field(default=())
    written: bool = False

    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "strides": list(self.strides), "written": self.written}

    @classmethod
    def from_json(cls, data: dict) -> TensorParam:
        return cls(data["name"], tuple(data["shape"]), data["dtype"], tuple(data["strides"]), data["written"])
