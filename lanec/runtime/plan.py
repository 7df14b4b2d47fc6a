"""plan.bin: everything a GPU machine needs to run one compiled decode step, in one file.

Layout (little-endian):

    header  (56 bytes)  magic b"LANEPLAN" | format version u32 | flags u32 (0) |
                        body length u64 | SHA-256 of the body (32 bytes)
    body                section count u32, then per section: tag (4 bytes) | offset u64 | length u64
                        (offsets from the start of the body), then the sections' bytes

Sections: b"META" (JSON: buffers, weight bindings, launches, collectives, rank count, kernels'
hashes and entries),
b"CUBN" (one per distinct cubin, in kernel order), b"PROG" (the interpreter's `Program` JSON,
kept opaque), b"FORM" (the form text the plan was compiled from).

A weight buffer is made once, at load, from checkpoint tensors (its sources, by the form's weight
names) through a recorded chain of transforms; sources missing from a checkpoint are filled by a
seeded initialiser (`lanec.runtime.seeded`: each value a function of the seed, the name and its
index, uniform about `center` with standard deviation `scale`, rounded to the source's dtype).
A launch binds buffers by name at an element offset (a view into a wider buffer), and carries
its kernel's specialization as the compiler chose it (`spec`: shape, pitches, schedule), which
`lanec show` prints and the runtime reads only to refuse a GPU of too few SMs for a stream-K launch
(plans without it read as an empty spec).

A plan for N ranks (`lanec compile --tp N`, format 2: an older lanec refuses it rather than run
it without its all-reduces) holds rank 0's step; every rank launches the same kernels on its own
slices of the weights and states. A sharded weight's source names its slice (`shard`, as
`lanec.interp.tp.Shard` writes it: rank 0's part, re-pointed for each rank by `Shard.for_rank`)
and keeps the whole tensor's seeded initialiser, so N ranks and one compute the same model. Its
`collectives` are NCCL all-reduces (sum) enqueued before the launch at their place.

A launch arg with a `map` (format 3: an older lanec refuses the plan rather than pass a raw
pointer where a kernel reads a TMA tensor map) is the address of a tensor map the runtime encodes
at load over the arg's window (`TensorParam.tensor_map`: the window's dtype, shape and strides,
the box and the swizzle).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanec.runtime import dtypes
from lanec.runtime.launch import LaunchError, tensor_map_problems
from lanec.runtime.launch import LaunchShape as Shape  # a launch's grid, block, cluster, memory, PDL

MAGIC = b"LANEPLAN"
VERSION = 3  # the newest format read; a plan is written in the oldest format that holds it
HEADER = struct.Struct("<8sIIQ32s")
SECTION_COUNT = struct.Struct("<I")
SECTION = struct.Struct("<4sQQ")

# what a buffer is for (the lane dialect's buffers and the plan's share them)
ROLES = ("weight", "state", "activation", "input", "output")
# weight transform kind -> how many arrays it takes (None: one or more); weights.apply runs them
TRANSFORMS = {"none": 1, "concatenate": None, "stack": None, "interleave": None, "transpose": 1, "reshape": 1,
              "slice": 1, "quantize_q8_0": 1, "q8_0_values": 1, "q8_0_planes": 1}


class PlanError(ValueError):
    """A plan file or plan content that cannot be run (one line)."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise PlanError(message)


def _shape(values, what: str) -> tuple[int, ...]:
    _require(isinstance(values, (list, tuple)) and all(isinstance(v, int) and v >= 0 for v in values),
             f"{what}: shape {values!r} must be a list of non-negative integers")
    return tuple(values)


@dataclass(frozen=True)
class Buffer:
    """One device buffer. `source` links it to the interpreter's program: an input's role, a
    state's name, or an output's index in the program's outputs; weights and activations have
    none (weights are made by their binding)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str
    source: str | int | None = None

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.elements * dtypes.storage(self.dtype).itemsize

    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "role": self.role,
                "source": self.source}

    @classmethod
    def from_json(cls, data: dict) -> Buffer:
        return cls(data["name"], _shape(data["shape"], f"buffer {data['name']!r}"), data["dtype"], data["role"],
                   data.get("source"))


@dataclass(frozen=True)
class Source:
    """A checkpoint tensor a weight buffer is made from (the form's weight name), its shape and
    dtype, and the seeded initialiser used when no checkpoint holds it."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "bfloat16"
    scale: float = 0.02
    center: float = 0.0
    shard: str = ""  # rank 0's slice of the checkpoint tensor (a plan for N ranks), "" for all of it

    def to_json(self) -> dict:
        data = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "scale": self.scale,
                "center": self.center}
        return {**data, "shard": self.shard} if self.shard else data

    @classmethod
    def from_json(cls, data: dict) -> Source:
        return cls(data["name"], _shape(data["shape"], f"weight source {data['name']!r}"), data["dtype"],
                   float(data["scale"]), float(data["center"]), str(data.get("shard", "")))


@dataclass(frozen=True)
class Transform:
    """One step of a weight's layout change. `concatenate` (params: axis, default 0: checkpoint
    rows back to back), `stack` (axis, default 0: experts), `interleave` (rows: tiles of that
    many rows taken from each source in turn: gate/up tiles side by side), `transpose` (axes,
    default reversed), `reshape` (shape), `slice` (axis, start, stop: a latent attention's key or
    value half of each head's rows), `quantize_q8_0` (per 32-value block of the last axis: fp16 scale then 32
    int8 words; uint8 [..., K / 32 * 34]), `q8_0_values` (the values those blocks stand for, q * d, as
    floats: q8_0 rows a kernel reads widened, stored in the buffer's dtype), `q8_0_planes` (those
    blocks' bytes reordered a row: its int8 values back to back, then its fp16 scales: what
    q8_gemm_tc reads), `none`."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"kind": self.kind, "params": self.params}

    @classmethod
    def from_json(cls, data: dict) -> Transform:
        return cls(data["kind"], dict(data.get("params", {})))


@dataclass(frozen=True)
class WeightBinding:
    """How weight buffer `buffer` is made: its sources through `transforms`, in order (the first
    step takes all sources; later steps one array)."""

    buffer: str
    sources: tuple[Source, ...]
    transforms: tuple[Transform, ...] = ()

    def to_json(self) -> dict:
        return {"buffer": self.buffer, "sources": [s.to_json() for s in self.sources],
                "transforms": [t.to_json() for t in self.transforms]}

    @classmethod
    def from_json(cls, data: dict) -> WeightBinding:
        return cls(data["buffer"], tuple(Source.from_json(s) for s in data["sources"]),
                   tuple(Transform.from_json(t) for t in data["transforms"]))


@dataclass(frozen=True)
class Arg:
    """A kernel parameter: the address of `buffer`'s element `offset` (static-shape view), or with
    `map` (`launch.tensor_map_record`'s) the address of a TMA tensor map over that view."""

    buffer: str
    offset: int = 0
    map: dict | None = None

    def to_json(self) -> dict:
        data = {"buffer": self.buffer, "offset": self.offset}
        if self.map is not None:
            data["map"] = self.map
        return data

    @classmethod
    def from_json(cls, data: dict) -> Arg:
        record = data.get("map")
        _require(record is None or isinstance(record, dict), "a launch arg's map must be an object")
        return cls(data["buffer"], int(data["offset"]), record)


@dataclass(frozen=True)
class Launch:
    """One kernel launch of the step: `name` labels it in timings (e.g. "gemv qkv 0"); `spec` is
    the kernel's specialization as the compiler chose it (shape, schedule, ...: for people and
    tools reading the plan; the runtime launches the cubin and never reads it)."""

    name: str
    kernel: int
    entry: str
    shape: Shape
    args: tuple[Arg, ...]
    spec: dict = field(default_factory=dict)
    traffic: dict = field(default_factory=dict)  # {"read": bytes, "written": bytes} at most (`base.traffic`)

    def to_json(self) -> dict:
        return {"name": self.name, "kernel": self.kernel, "entry": self.entry, "shape": self.shape.to_json(),
                "args": [a.to_json() for a in self.args], "spec": self.spec, "traffic": self.traffic}

    @classmethod
    def from_json(cls, data: dict) -> Launch:
        spec = data.get("spec", {})  # plans written before specs were recorded have none
        if not isinstance(spec, dict):
            raise PlanError(f"launch {data.get('name')!r}: its spec must be an object, not {type(spec).__name__}")
        traffic = data.get("traffic", {})  # plans written before traffic was recorded have none
        if not isinstance(traffic, dict) or not all(k in ("read", "written") and isinstance(v, int) and v >= 0
                                                    for k, v in traffic.items()):
            raise PlanError(f"launch {data.get('name')!r}: its traffic must map read / written to byte counts")
        return cls(data["name"], int(data["kernel"]), data["entry"], Shape.from_json(data["shape"]),
                   tuple(Arg.from_json(a) for a in data["args"]), spec, traffic)


@dataclass(frozen=True)
class OneShot:
    """The `all_reduce_oneshot` kernel a collective may carry (lanec/runtime/peer.py): kernel
    `kernel` of the plan's cubins, its `entry`, launched at `shape` on (source, target, peer table)."""

    kernel: int
    entry: str
    shape: Shape

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "entry": self.entry, "shape": self.shape.to_json()}

    @classmethod
    def from_json(cls, data: dict) -> OneShot:
        return cls(int(data["kernel"]), data["entry"], Shape.from_json(data["shape"]))


def _check_args(where: str, args, by_name: dict) -> None:
    for arg in args:
        _require(arg.buffer in by_name, f"{where}: binds buffer {arg.buffer!r}, which the plan does not have")
        _require(0 <= arg.offset < max(by_name[arg.buffer].elements, 1),
                 f"{where}: offset {arg.offset} is outside buffer {arg.buffer!r} "
                 f"({by_name[arg.buffer].elements} elements)")
        if arg.map is not None:
            _check_map(f"{where}: the tensor map over {arg.buffer!r}", arg, by_name[arg.buffer])


def _check_map(where: str, arg: Arg, buffer: Buffer) -> None:
    """A tensor map's record encodes (`tensor_map_problems`), in its buffer's dtype, from a
    16-byte-aligned element, over rows that lie inside the buffer."""
    record = arg.map
    fields = ("dtype", "shape", "strides", "box", "swizzle")
    _require(all(k in record for k in fields), f"{where}: its record needs {', '.join(fields)}")
    _require(record["dtype"] == buffer.dtype, f"{where}: reads {record['dtype']} from a {buffer.dtype} buffer")
    itemsize = dtypes.storage(buffer.dtype).itemsize
    problems = tensor_map_problems(record, itemsize)
    _require(not problems, f"{where}: {problems[0] if problems else ''}")
    _require(arg.offset * itemsize % 16 == 0, f"{where}: starts {arg.offset * itemsize} bytes into the buffer, "
             "not on a 16-byte boundary")
    (rows, width), (pitch, _) = record["shape"], record["strides"]
    end = arg.offset + (rows - 1) * pitch + width
    _require(end <= buffer.elements, f"{where}: its {rows} rows end at element {end}, past the buffer's "
             f"{buffer.elements}")


@dataclass(frozen=True)
class Fused:
    """The `all_reduce_norm` kernel a collective may carry (fold-all-reduce-into-norm): on the
    one-shot engine, one launch of kernel `kernel` at `shape` on `args` (the partial sums, the
    norm's other inputs and its outputs) and the peer table does the all-reduce and the rmsnorm
    launch `replaces` (the launch at the collective's place), a CTA for each of its `rows`."""

    kernel: int
    entry: str
    shape: Shape
    args: tuple[Arg, ...]
    replaces: int
    rows: int

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "entry": self.entry, "shape": self.shape.to_json(),
                "args": [a.to_json() for a in self.args], "replaces": self.replaces, "rows": self.rows}

    @classmethod
    def from_json(cls, data: dict) -> Fused:
        return cls(int(data["kernel"]), data["entry"], Shape.from_json(data["shape"]),
                   tuple(Arg.from_json(a) for a in data["args"]), int(data["replaces"]), int(data["rows"]))


@dataclass(frozen=True)
class Collective:
    """An all-reduce (sum) over the plan's ranks, enqueued on the step's stream right before
    launch `at` (after the last launch where `at` is the launch count): `count` values of `dtype`
    (bfloat16 or float32) from `source` into `target` (the same place: in place). NCCL's, or,
    where the plan carries its `oneshot` kernel and the runtime takes it, one launch reading the
    peers' memory (lanec/runtime/peer.py); with `fused` too, that launch and the rmsnorm after it as
    one."""

    name: str
    at: int
    source: Arg
    target: Arg
    count: int
    dtype: str
    oneshot: OneShot | None = None
    fused: Fused | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "kind": "all_reduce", "op": "sum", "at": self.at, "source": self.source.to_json(),
                "target": self.target.to_json(), "count": self.count, "dtype": self.dtype,
                **({"oneshot": self.oneshot.to_json()} if self.oneshot is not None else {}),
                **({"fused": self.fused.to_json()} if self.fused is not None else {})}

    @classmethod
    def from_json(cls, data: dict) -> Collective:
        _require(data.get("kind") == "all_reduce" and data.get("op") == "sum",
                 f"collective {data.get('name')!r}: {data.get('kind')} {data.get('op')}; this lanec runs "
                 "all_reduce sum")
        oneshot = OneShot.from_json(data["oneshot"]) if data.get("oneshot") is not None else None
        fused = Fused.from_json(data["fused"]) if data.get("fused") is not None else None
        return cls(data["name"], int(data["at"]), Arg.from_json(data["source"]), Arg.from_json(data["target"]),
                   int(data["count"]), data["dtype"], oneshot, fused)


@dataclass(frozen=True)
class Seeder:
    """The `seeded` kernel a plan carries to make its seeded weights on the GPU (runtime/gpu_seeding.py):
    its cubin and entry for buffers of `dtype`, filling `count` values a launch at `shape`."""

    dtype: str
    entry: str
    shape: Shape
    count: int
    cubin: bytes = field(repr=False, default=b"")

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "entry": self.entry, "shape": self.shape.to_json(), "count": self.count,
                "sha256": hashlib.sha256(self.cubin).hexdigest()}

    @classmethod
    def from_json(cls, data: dict, cubin: bytes) -> Seeder:
        _require(hashlib.sha256(cubin).hexdigest() == data["sha256"], f"seeder {data['dtype']!r}: its cubin "
                 "does not match its hash")
        _require(data["dtype"] in ("bfloat16", "float32") and int(data["count"]) > 0,
                 f"seeder {data['dtype']!r}: a bfloat16 or float32 seeder of a positive count")
        return cls(data["dtype"], data["entry"], Shape.from_json(data["shape"]), int(data["count"]), cubin)


@dataclass
class Plan:
    cubins: list[bytes] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    buffers: list[Buffer] = field(default_factory=list)
    weights: list[WeightBinding] = field(default_factory=list)
    program: str = ""
    form: str = ""
    seeders: list[Seeder] = field(default_factory=list)  # plans written before GPU seeding have none
    ranks: int = 1  # the GPUs the plan runs on (tensor parallel, `lanec compile --tp N`)
    collectives: list[Collective] = field(default_factory=list)

    @property
    def version(self) -> int:
        """The format the plan is written in: 3 where a launch reads a tensor map, else 2 for a
        plan for several ranks, else 1."""
        if any(a.map is not None for launch in self.launches for a in launch.args):
            return 3
        return 2 if self.ranks > 1 else 1

    def add_cubin(self, cubin: bytes) -> int:
        """The kernel index of `cubin`, added once per distinct content."""
        digest = hashlib.sha256(cubin).digest()
        for index, known in enumerate(self.cubins):
            if hashlib.sha256(known).digest() == digest:
                return index
        self.cubins.append(bytes(cubin))
        return len(self.cubins) - 1

    def buffer(self, name: str) -> Buffer:
        for buffer in self.buffers:
            if buffer.name == name:
                return buffer
        raise PlanError(f"the plan has no buffer {name!r}")

    def validate(self) -> None:
        """Every cross-reference resolves; raise PlanError naming the first that does not."""
        by_name: dict[str, Buffer] = {}
        for buffer in self.buffers:
            _require(buffer.name not in by_name, f"buffer {buffer.name!r} is declared twice")
            _require(buffer.role in ROLES, f"buffer {buffer.name!r}: role {buffer.role!r} is not one of {ROLES}")
            try:
                dtypes.canonical(buffer.dtype)
            except ValueError as exc:
                raise PlanError(f"buffer {buffer.name!r}: {exc}") from None
            if buffer.role == "output":
                _require(isinstance(buffer.source, int) and buffer.source >= 0,
                         f"output buffer {buffer.name!r} must name its index in the program's outputs")
            if buffer.role in ("input", "state"):
                _require(isinstance(buffer.source, str) and buffer.source != "",
                         f"{buffer.role} buffer {buffer.name!r} must name its {buffer.role} in the program")
            by_name[buffer.name] = buffer
        bound = set()
        for binding in self.weights:
            where = f"weight binding of {binding.buffer!r}"
            _require(binding.buffer in by_name, f"{where}: the plan has no buffer {binding.buffer!r}")
            _require(by_name[binding.buffer].role == "weight", f"{where}: buffer {binding.buffer!r} is "
                     f"a {by_name[binding.buffer].role}, not a weight")
            _require(binding.buffer not in bound, f"buffer {binding.buffer!r} has two weight bindings")
            _require(len(binding.sources) > 0, f"{where}: no sources")
            bound.add(binding.buffer)
            for position, transform in enumerate(binding.transforms):
                _require(transform.kind in TRANSFORMS, f"{where}: unknown transform {transform.kind!r}")
                takes = len(binding.sources) if position == 0 else 1
                arity = TRANSFORMS[transform.kind]
                _require(arity is None or arity == takes,
                         f"{where}: transform {transform.kind!r} takes one array, not {takes}")
            _require(bool(binding.transforms) or len(binding.sources) == 1,
                     f"{where}: {len(binding.sources)} sources need a transform that joins them")
            for source in binding.sources:
                try:
                    dtypes.canonical(source.dtype)
                except ValueError as exc:
                    raise PlanError(f"{where}: source {source.name!r}: {exc}") from None
        unbound = [b.name for b in self.buffers if b.role == "weight" and b.name not in bound]
        _require(not unbound, f"weight buffer {unbound[0]!r} has no weight binding" if unbound else "")
        for index, launch in enumerate(self.launches):
            where = f"launch {index} ({launch.name})"
            _require(0 <= launch.kernel < len(self.cubins),
                     f"{where}: kernel {launch.kernel} does not exist (the plan has {len(self.cubins)} cubins)")
            try:
                launch.shape.check()
            except LaunchError as exc:
                raise PlanError(f"{where}: {exc}") from None
            _check_args(where, launch.args, by_name)
        self.validate_collectives(by_name)

    def validate_collectives(self, by_name: dict[str, Buffer]) -> None:
        """A collective needs several ranks, a place in the launch order, `count` values of its
        dtype inside both buffers; the launch after it runs without PDL."""
        _require(isinstance(self.ranks, int) and self.ranks >= 1, f"a plan for {self.ranks!r} ranks: at least 1")
        _require(not self.collectives or self.ranks > 1,
                 f"{len(self.collectives)} collectives in a plan for one rank: nothing to reduce over")
        place = 0
        for collective in self.collectives:
            where = f"collective {collective.name!r}"
            _require(place <= collective.at <= len(self.launches),
                     f"{where}: at launch {collective.at}, out of order or past the {len(self.launches)} launches")
            place = collective.at
            _require(collective.dtype in ("bfloat16", "float32"), f"{where}: sums bfloat16 or float32, "
                     f"not {collective.dtype!r}")
            _require(collective.count > 0, f"{where}: a count of {collective.count} values")
            for arg in (collective.source, collective.target):
                buffer = by_name.get(arg.buffer)
                _require(buffer is not None, f"{where}: the plan has no buffer {arg.buffer!r}")
                _require(dtypes.canonical(buffer.dtype) == collective.dtype,
                         f"{where}: buffer {arg.buffer!r} holds {buffer.dtype}, not {collective.dtype}")
                _require(0 <= arg.offset and arg.offset + collective.count <= buffer.elements,
                         f"{where}: {collective.count} values from {arg.offset} run past buffer {arg.buffer!r} "
                         f"({buffer.elements} elements)")
            if collective.oneshot is not None:
                _require(0 <= collective.oneshot.kernel < len(self.cubins),
                         f"{where}: one-shot kernel {collective.oneshot.kernel} does not exist (the plan has "
                         f"{len(self.cubins)} cubins)")
            fused = collective.fused
            if fused is not None:
                _require(0 <= fused.kernel < len(self.cubins), f"{where}: its all_reduce_norm kernel {fused.kernel} "
                         f"does not exist (the plan has {len(self.cubins)} cubins)")
                _require(fused.replaces == collective.at < len(self.launches)
                         and self.launches[fused.replaces].name.startswith("rmsnorm"),
                         f"{where}: its all_reduce_norm replaces launch {fused.replaces}, not the rmsnorm launch at "
                         "its place")
                _require(fused.rows >= 1 and collective.count % fused.rows == 0,
                         f"{where}: {collective.count} values are not {fused.rows} rows")
                _check_args(f"{where}'s all_reduce_norm", fused.args, by_name)
            if collective.at < len(self.launches):
                launch = self.launches[collective.at]
                _require(not launch.shape.pdl, f"launch {collective.at} ({launch.name}) follows {where} with PDL: "
                         "NCCL never triggers it, so it must launch without")

    # -- the file -------------------------------------------------------------------------------

    def meta(self) -> dict:
        return {
            "kernels": [hashlib.sha256(c).hexdigest() for c in self.cubins],
            "buffers": [b.to_json() for b in self.buffers],
            "weights": [w.to_json() for w in self.weights],
            "launches": [launch.to_json() for launch in self.launches],
            "seeders": [seeder.to_json() for seeder in self.seeders],
            **({"ranks": self.ranks, "collectives": [c.to_json() for c in self.collectives]} if self.ranks > 1
               else {}),
        }

    def to_bytes(self) -> bytes:
        self.validate()
        sections = [(b"META", json.dumps(self.meta(), separators=(",", ":")).encode())]
        sections += [(b"CUBN", cubin) for cubin in self.cubins]
        sections += [(b"SEED", seeder.cubin) for seeder in self.seeders]
        sections += [(b"PROG", self.program.encode()), (b"FORM", self.form.encode())]
        table_size = SECTION_COUNT.size + SECTION.size * len(sections)
        table, data, offset = [SECTION_COUNT.pack(len(sections))], [], table_size
        for tag, payload in sections:
            table.append(SECTION.pack(tag, offset, len(payload)))
            data.append(payload)
            offset += len(payload)
        body = b"".join(table + data)
        return HEADER.pack(MAGIC, self.version, 0, len(body), hashlib.sha256(body).digest()) + body

    def write(self, path: str | Path) -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "plan") -> Plan:
        _require(len(data) >= len(MAGIC) and data[: len(MAGIC)] == MAGIC,
                 f"{name} is not a lanec plan (no LANEPLAN magic number)")
        _require(len(data) >= HEADER.size, f"{name} is truncated: {len(data)} bytes, shorter than the header")
        _magic, version, _flags, body_length, digest = HEADER.unpack_from(data)
        _require(version <= VERSION, f"{name} is plan format {version}, written by a newer lanec; "
                 f"this one reads format {VERSION}: update lanec or recompile the plan")
        _require(version >= 1, f"{name} declares plan format {version}, which never existed")
        body = data[HEADER.size:]
        _require(len(body) >= body_length,
                 f"{name} is truncated: {HEADER.size + body_length} bytes expected, {len(data)} present")
        _require(len(body) == body_length,
                 f"{name} has {len(body) - body_length} bytes after its end: not one plan file")
        _require(hashlib.sha256(body).digest() == digest, f"{name} is corrupted: its checksum does not match")
        try:
            plan = cls._parse(body)
            _require(version >= plan.version, f"declares format {version} but holds a plan of format "
                     f"{plan.version} ({plan.ranks} ranks{', tensor maps' if plan.version == 3 else ''})")
            return plan
        except PlanError as exc:
            raise PlanError(f"{name}: {exc}") from None
        except (KeyError, TypeError, ValueError, IndexError, struct.error, UnicodeDecodeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
            raise PlanError(f"{name} is malformed: {detail}") from None

    @classmethod
    def _parse(cls, body: bytes) -> Plan:
        (count,) = SECTION_COUNT.unpack_from(body)
        sections: dict[bytes, list[bytes]] = {}
        for i in range(count):
            tag, offset, length = SECTION.unpack_from(body, SECTION_COUNT.size + i * SECTION.size)
            _require(offset + length <= len(body), f"section {tag!r} runs past the end of the file")
            sections.setdefault(tag, []).append(body[offset: offset + length])
        for tag in (b"META", b"PROG", b"FORM"):
            _require(len(sections.get(tag, [])) == 1, f"needs exactly one {tag.decode()} section")
        meta = json.loads(sections[b"META"][0])
        cubins = sections.get(b"CUBN", [])
        _require(len(cubins) == len(meta["kernels"]),
                 f"lists {len(meta['kernels'])} kernels but holds {len(cubins)} cubins")
        for index, (cubin, digest) in enumerate(zip(cubins, meta["kernels"])):
            _require(hashlib.sha256(cubin).hexdigest() == digest, f"cubin {index} does not match its hash")
        plan = cls(
            cubins=list(cubins),
            launches=[Launch.from_json(x) for x in meta["launches"]],
            buffers=[Buffer.from_json(x) for x in meta["buffers"]],
            weights=[WeightBinding.from_json(x) for x in meta["weights"]],
            program=sections[b"PROG"][0].decode(),
            form=sections[b"FORM"][0].decode(),
        )
        seeders, seeds = meta.get("seeders", []), sections.get(b"SEED", [])
        _require(len(seeders) == len(seeds), f"lists {len(seeders)} seeders but holds {len(seeds)} seeder cubins")
        plan.seeders = [Seeder.from_json(x, cubin) for x, cubin in zip(seeders, seeds, strict=True)]
        plan.ranks = meta.get("ranks", 1)
        plan.collectives = [Collective.from_json(x) for x in meta.get("collectives", [])]
        plan.validate()
        return plan

    @classmethod
    def read(cls, path: str | Path) -> Plan:
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise PlanError(f"cannot read {path}: {exc.strerror}") from None
        return cls.from_bytes(data, str(path))


def _bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def _dims(values) -> str:
    return "x".join(str(v) for v in values)


def spec_text(spec: dict) -> str:
    """A kernel specialization (or shape) as `lanec show` and `lanec explain` print it:
    `key=value` sorted by key, sequences as a,b,c, named fields (a schedule) as (key=value ...)."""
    def value(v) -> str:
        if isinstance(v, dict):
            return "(" + " ".join(f"{k}={value(x)}" for k, x in v.items()) + ")"
        return ",".join(value(x) for x in v) if isinstance(v, (list, tuple)) else str(v)

    return " ".join(f"{k}={value(v)}" for k, v in sorted(spec.items()))


def describe(plan: Plan) -> str:
    """What `lanec show` prints: kernels, buffers by role, weight bindings, the launch schedule."""
    lines = [f"lanec plan, format {plan.version}: {len(plan.launches)} launches of {len(plan.cubins)} kernels "
             f"({_bytes(sum(len(c) for c in plan.cubins))} of cubins)"]
    if plan.ranks > 1:
        lines.append(f"tensor parallel over {plan.ranks} ranks (one a GPU; rank 0's step below): "
                     f"{len(plan.collectives)} all-reduces a step")
    for role in ROLES:
        members = [b for b in plan.buffers if b.role == role]
        if members:
            lines.append(f"{role} buffers: {len(members)}, {_bytes(sum(b.nbytes for b in members))}")
            lines += [f"  {b.name:<28} {b.dtype:<9} [{', '.join(map(str, b.shape))}]"
                      + (f"  <- {b.source}" if b.source is not None else "") for b in members]
    if plan.weights:
        lines.append("weight bindings:")
        for binding in plan.weights:
            steps = " | ".join(t.kind + (f"({', '.join(f'{k}={v}' for k, v in t.params.items())})" if t.params else "")
                               for t in binding.transforms) or "as stored"
            shards = "".join(f" [{s.shard}]" for s in binding.sources if s.shard)
            lines.append(f"  {binding.buffer:<28} <- {', '.join(s.name for s in binding.sources)}{shards}: {steps}")
    lines.append("kernels:")
    for index in range(len(plan.cubins)):
        users = [launch for launch in plan.launches if launch.kernel == index]
        reducing = any(c.oneshot is not None and c.oneshot.kernel == index for c in plan.collectives)
        fusing = any(c.fused is not None and c.fused.kernel == index for c in plan.collectives)
        kind = (users[0].name.split()[0] if users else "all_reduce_oneshot" if reducing
                else "all_reduce_norm" if fusing else "(no launch)")
        spec = spec_text(users[0].spec) if users else ""
        lines.append(f"  k{index:<3} {kind:<12} {len(users):>3} launches  {spec}".rstrip())
    lines.append("launches:")
    width = max((len(launch.name) for launch in plan.launches), default=4)
    before = {}
    for collective in plan.collectives:
        before.setdefault(collective.at, []).append(collective)
    for index in range(len(plan.launches) + 1):
        for c in before.get(index, []):
            target = "in place" if c.target == c.source else f"-> {c.target.buffer}" + (
                f"+{c.target.offset}" if c.target.offset else "")
            engine = f"nccl or one-shot (k{c.oneshot.kernel})" if c.oneshot is not None else "nccl"
            if c.fused is not None:
                engine += f", or with launch {c.fused.replaces} as one (k{c.fused.kernel})"
            lines.append(f"      {'all_reduce':<{width}}  {engine} sum of {c.count} {c.dtype} over {plan.ranks} ranks  "
                         f"({c.source.buffer}{f'+{c.source.offset}' if c.source.offset else ''} {target})")
        if index == len(plan.launches):
            break
        launch = plan.launches[index]
        shape = launch.shape
        args = ", ".join(arg_text(a) for a in launch.args)
        lines.append(f"  {index:>3} {launch.name:<{width}}  k{launch.kernel} grid {_dims(shape.grid)} "
                     f"block {_dims(shape.block)} cluster {_dims(shape.cluster)} smem {_bytes(shape.shared_bytes)}"
                     f"{' pdl' if shape.pdl else ''}  ({args})")
    lines.append(f"form: {len(plan.form.splitlines())} lines; interpreter program: {_bytes(len(plan.program))}")
    return "\n".join(lines)


def arg_text(arg: Arg) -> str:
    """A launch arg as `lanec show` prints it: buffer[+offset], a tensor map as map(buffer, box)."""
    where = arg.buffer + (f"+{arg.offset}" if arg.offset else "")
    if arg.map is None:
        return where
    box = "x".join(map(str, arg.map.get("box", [])))
    return f"map({where} box {box}{' swizzle ' + str(arg.map['swizzle']) if arg.map.get('swizzle') else ''})"


def routing_buffer(router: str) -> str:
    """The plan buffer holding the expert ids a mixture's router chose, named from its router
    weight: the lowering makes it, `lanec run --check` reads it back (`Program.run`'s routing)."""
    return f"{router}.ids"
