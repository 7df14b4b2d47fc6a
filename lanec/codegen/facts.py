"""The lane's kernels as plain Python (no CuTe DSL): the constants they share, each kernel's
static limits (a spec whose `check()` both the kernel's `__init__` and the held-back rules call,
so a rule never restates a limit), and the schedules (frozen dataclasses of named knobs, which the
tuned table sets by name).

A spec lists every limit it breaks (`problems()`, one line each, naming the limit and why);
`check()` raises them as one ValueError. Fields a caller does not know yet (a rule knows the
form, not the pitches the lowering picks) keep their defaults, which break nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import ClassVar

from lanec.runtime.dtypes import storage

# ----------------------------------------------------------------------------------------------
# Constants every kernel shares

WARP = 32  # threads a warp
VECTOR_BYTES = 16  # kernels move values as 16-byte vectors: rows and bases start 16-byte aligned
VECTOR = 8  # bf16 values in one 16-byte vector
SM_COUNT = 132  # streaming multiprocessors of an H100 / H200 SXM: grid heuristics size work for them
SHARED_LIMIT = 227 * 1024  # shared memory one CTA may use on sm_90 (bytes)
SM_SHARED = 228 * 1024  # an SM's shared memory, shared by its resident CTAs
SM_RESERVED_SHARED = 1024  # ... of which the system keeps this much for each resident CTA


def vector_width(what: str, width: int, per_vector: int = VECTOR, dtype: str = "bf16") -> str | None:
    """Why `width` values cannot be moved as 16-byte vectors of `per_vector` values (None: they can)."""
    if width < per_vector or width % per_vector:
        return (f"{what} {width} must be a positive multiple of {per_vector}: {dtype} values move as "
                "16-byte vectors")
    return None


def row_pitch(what: str, pitch: int, width: int) -> str | None:
    """Why rows of `width` values cannot sit `pitch` values apart (None: they can): a part of a
    wider row is read in place only where every row starts 16-byte aligned."""
    if pitch < width or pitch % VECTOR:
        return (f"{what} {pitch}: at least the row's {width} values and a multiple of {VECTOR} (rows start "
                "16-byte aligned)")
    return None


class Spec:
    """What every kernel spec shares: `problems()`, each a phrase that reads after the kernel's
    name ("width 100 must be ..."), and the `check()` that raises them."""

    kernel: ClassVar[str]

    def problems(self) -> list[str]:
        raise NotImplementedError

    def check(self) -> None:
        problems = self.problems()
        if problems:
            raise ValueError(f"{self.kernel} " + "; ".join(problems))


# ----------------------------------------------------------------------------------------------
# Schedules: the knobs a kernel can be told (the tuned table, lanec/codegen/schedules.json, names
# them by field)


class Schedule:
    """What every schedule shares: built from a mapping of its field names (the table's entries,
    a launch's recorded spec), with an error naming an unknown knob."""

    @classmethod
    def of(cls, value):
        """`value` as this schedule: itself, or a mapping of field names (missing fields keep
        their defaults)."""
        return value if isinstance(value, cls) else cls().updated(value)

    def updated(self, knobs: Mapping):
        """This schedule with `knobs` (a mapping of field names) set."""
        if not isinstance(knobs, Mapping):
            raise ValueError(f"{type(self).__name__} takes named fields ({', '.join(self.names())}); got {knobs!r}")
        unknown = sorted(set(knobs) - set(self.names()))
        if unknown:
            raise ValueError(f"{type(self).__name__} has no knob {unknown[0]!r} (knobs: {', '.join(self.names())})")
        return replace(self, **knobs)  # type: ignore[type-var]

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]

    def as_dict(self) -> dict:
        """Every field by name: what a launch records."""
        return asdict(self)  # type: ignore[call-overload]

    def changed(self, base=None) -> dict:
        """The fields that differ from `base`'s (by default the dataclass defaults): what the tuned
        table writes, against the shape's defaults."""
        base = type(self)() if base is None else base
        return {k: v for k, v in self.as_dict().items() if getattr(base, k) != v}


def _choice(owner: str, knob: str, value, allowed: Sequence, why: str) -> None:
    if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
        raise ValueError(f"{owner} {knob} is {why}; got {value!r}")


@dataclass(frozen=True)
class RowSchedule(Schedule):
    """The row products' knobs (gemv, gated_gemv): `warps` a CTA, weight `rows_per_cta`, whether
    the `tensor_cores` multiply, and whether a CTA's weight rows are copied whole into shared
    memory (`preload`: bulk copies issued before the PDL wait, on the CUDA cores, the grid at most
    one wave of CTAs); None leaves the kernel's own choice for its shape."""

    warps: int | None = None
    rows_per_cta: int | None = None
    tensor_cores: bool | None = None
    preload: bool | None = None

    def __post_init__(self) -> None:
        if self.warps is not None and not (type(self.warps) is int and 1 <= self.warps <= 32):
            raise ValueError(f"RowSchedule warps is 1-32 (a CTA of at most 1024 threads); got {self.warps!r}")
        if self.rows_per_cta is not None and not (type(self.rows_per_cta) is int and self.rows_per_cta >= 1):
            raise ValueError(f"RowSchedule rows_per_cta is at least 1; got {self.rows_per_cta!r}")
        if self.tensor_cores is not None and not isinstance(self.tensor_cores, bool):
            raise ValueError(f"RowSchedule tensor_cores is true, false or absent; got {self.tensor_cores!r}")
        if self.preload is not None and not isinstance(self.preload, bool):
            raise ValueError(f"RowSchedule preload is true, false or absent; got {self.preload!r}")


@dataclass(frozen=True)
class KdaSchedule(Schedule):
    """KdaSplit's knobs (its docstring says what each does): `early` loads (0 after the PDL wait,
    1 before it, 2 and the state staged in shared memory, 3 and the gate warp's F_B rows staged),
    `lanes` a state row, a minimum `occupancy` of CTAs an SM (0: none), the `cluster` of CTAs
    that split a head's value rows, `evict` (the staged state copy L2 evict-first), `fast_math`
    (ftz FMAs, approximate sigmoids) and `release_at_entry` (dependents launched as the kernel
    starts rather than once its inputs are read). `for_shape` gives a model shape's defaults,
    which the tuned table's entries and the kernel's callers set knobs over."""

    early: int = 0
    lanes: int = 16
    occupancy: int = 0
    cluster: int = 4
    evict: bool = False
    fast_math: bool = False
    release_at_entry: bool = False

    def __post_init__(self) -> None:
        _choice("KdaSplit", "early", self.early, (0, 1, 2, 3),
                "0 (loads after the PDL wait), 1 (early loads), 2 (and staged state) or 3 (and staged F_B rows)")
        _choice("KdaSplit", "lanes", self.lanes, (4, 8, 16, 32),
                "4, 8, 16 or 32 lanes per state row (a power of two that divides a warp)")
        if not isinstance(self.occupancy, int) or isinstance(self.occupancy, bool) or self.occupancy < 0:
            raise ValueError(f"KdaSplit occupancy (minimum CTAs per SM) must be >= 0; got {self.occupancy!r}")
        _choice("KdaSplit", "cluster", self.cluster, (1, 2, 4, 8, 16),
                "the CTAs a head's 128 value rows split over: 1, 2, 4, 8 or 16")
        for knob in ("evict", "fast_math", "release_at_entry"):
            _choice("KdaSplit", knob, getattr(self, knob), (False, True), "true or false")
        if self.evict and self.early < 2:
            raise ValueError("KdaSplit evict marks the staged state copy: it needs early 2 or 3")
        if self.early == 3 and KDA_HEAD // self.cluster < 64:
            raise ValueError(f"KdaSplit early 3 stages F_B rows 16 bytes a lane, two decays a lane: it needs at "
                             f"least 64 rows a CTA (cluster <= 2); got {KDA_HEAD // self.cluster}")

    @classmethod
    def for_shape(cls, heads: int, batch: int, knobs: Mapping | None = None) -> KdaSchedule:
        """The seed's schedule for `heads` at `batch` requests, with `knobs` (a mapping of field
        names) set: a cluster of 8 and dependents released at entry for one request (4 CTAs a
        head otherwise), 8 lanes a state row up to 2 requests (4 at 6 heads), fast math at 12
        heads (TP8 of Kimi Linear)."""
        seed = cls(lanes=8 if batch <= (4 if heads == 6 else 2) else 16, cluster=8 if batch == 1 else 4,
                   fast_math=heads == 12, release_at_entry=batch == 1)
        return seed.updated(knobs or {})


# ----------------------------------------------------------------------------------------------
# gemv and gated_gemv: rows of weights dotted with a few activation rows

# Activation rows a gemv / gated_gemv launch takes (two 16-row A tiles of the MMA); the lowering runs
# more as several launches.
GEMV_ROWS = 32
# A product that takes gemv launches above GEMV_ROWS rows (those gemm_tc refuses or GEMM_PER_HEAD_FROM leaves it: a
# per-head product below that fact's rows, a head's outputs not whole 64-row tiles, a norm riding in its launch)
# from this many rows (None: never) runs as one launch of blocks of GEMV_ROWS rows
# (`row_blocks`, gemv.py), where its rows are whole blocks, in place of a launch a block. At Kimi Linear's batch
# 256 that is 112 launches a step in 14, each block of an output tile beside the others (its weight rows read from
# L2). Measured in the real-size Kimi Linear step on the H200 (bench/RESULTS.md, thirty-fourth session): batch 256
# -437 us (-1.8%), batch 64 -37 us (-0.3%), two paired rounds each; both plans' --check agree. Those products then
# moved onto gemm_tc (GEMM_PER_HEAD_FROM, the same session's next measurement).
GEMV_ROW_BLOCKS_FROM: int | None = 64
GEMV_TENSOR_CORE_ROWS = 4  # rows from which the tensor cores multiply by default
GEMV_WARPS = 8  # warps a CTA on the CUDA cores, unless a schedule says otherwise
# A gemv of at most GEMV_PRELOAD_ROWS rows whose activation is the output of a launch of one of these kernels,
# latency-bound chains that stream few bytes after their PDL wait, preloads its weight rows into shared memory
# before its own wait (RowSchedule preload: one wave of CTAs, bulk copies), so the product's bytes stream under
# that launch's chain instead of after it; the lowering takes it where the rows fit a CTA's shared memory, and a
# schedule table entry's own `preload` knob decides in its place. Measured in the real-size Kimi Linear batch-1
# step on three H200s (bench/RESULTS.md, twenty-eighth session): after KdaSplit the o_proj's increment falls 0.9 us
# and KdaSplit's rises 0.5-0.9 (its dependent loads slowed by the stream beneath them), -3.2 us a step over seven
# paired rounds; after the latent attention (its value gemv) +2 us a launch, after the value gemv (the MLA o_proj)
# +10 us a step: neither is in the set.
GEMV_PRELOAD_AFTER: frozenset = frozenset({"kda_split"})
GEMV_PRELOAD_ROWS = 1
# Where each launch releases its PDL dependents (`griddepcontrol.launch_dependents`): at its entry (the body's first
# statement: the next launch starts once every CTA of this one has started) or where its kernel always has, after its
# own PDL wait or once its inputs are read (KdaSplit at its entry where its schedule says `release_at_entry`). A
# dependent reads nothing of its predecessor's before its own wait, which waits for the predecessor's end, so the
# point moves no data: only when the next launch's early work starts. The lowering picks it a launch
# (`release_point`, lower.py) by RELEASE_RULE:
# - "wait": every launch after its wait;
# - "entry": every launch at its entry;
# - "successor": at its entry where the next launch streams bytes before its own wait (EARLY_STREAMS);
# - "pass-through": as "successor", and only where this launch streams nothing early itself (a norm, a rope, an
#   elementwise op, a quantize, ...: its launch and its run hidden under the next launch's stream).
# Measured on the H200 as kernel kinds first (bench/RESULTS.md, 2026-12-01, eighteenth session): every kernel at its
# entry took 15-20 us off the real-size Kimi Linear batch-1 step and put 3-7 us on dense-small; either its norms or
# its GEMVs kept after their wait gave dense-small back its time, and the Kimi step kept its gain only with both at
# entry. So it is a matter of what follows a launch, not of its kernel. By launch (nineteenth session, three H200s,
# us a step saved against "wait"): "successor" with EARLY_STREAM_CTAS 22.1 on the real-size batch-1 step (2068.5 ->
# 2046.4), 2.3 on dense-small-q8, 0.4 on dense-small, -0.6 on the KDA-only step (noise); "entry" 17.9, -5.1 on
# dense-small; "pass-through" 17.3, 2.0, 2.1, -1.5. The default:
RELEASE_RULE = "successor"
RELEASE_RULES = ("wait", "entry", "successor", "pass-through")
# The kernels whose work before their PDL wait is a stream of bytes that need none of the predecessor's outputs:
# the products' weight rows, the attentions' cache rows and page tables, KdaSplit's states and gate weights, the
# per-row mixture's router weights, shared expert and chosen down rows (L2 prefetches).
EARLY_STREAMS = frozenset({"gemv", "gated_gemv", "gemm_tc", "q8_gemv", "q8_gated_gemv", "q8_gemm_tc", "attention",
                           "latent_attention", "kda_split", "mixture_router", "mixture_gated", "mixture_down"})
# A next launch of more CTAs than this (the lm heads: 16000 CTAs at one row of a 32000 vocabulary, 81920 at
# 163840) is not started early: only its first wave of CTAs streams before its wait, a sliver of its bytes, and
# that sliver competes with the predecessors' tail (dense-small's final norm released before its lm head alone:
# -0.3 to -1.5 us a step; every other norm but that one +1.9 to +3.3 us; bench/RESULTS.md, nineteenth session).
# The products of 4096-6288 CTAs (the gated pairs, Kimi Linear's merged KDA product) are started early.
EARLY_STREAM_CTAS = 8192
# What a launch in a chain of PDL launches costs beyond its bytes (us): our bf16 gemv's time at one row
# against 2304-wide weights of 4.7 to 755 MB fitted to t = floor + bytes / rate gave 2.04 us + 4.43 TB/s
# (q8_gemv 2.06 us, torch's matmul in a graph 5.74 us; bench/gemv.py and bench/q8.py's floor sets, H200,
# 2026-11-30). bench/model.py counts it once a launch in its floor-adjusted roofline.
LAUNCH_FLOOR_US = 2.04
# The argmax epilogue (fold-argmax-into-gemv) gathers its CTAs' best keys in two levels: a CTA
# offers its keys to its group's slot (block % groups) and draws its group's ticket, the group's
# last CTA carries the group's keys to the grid's slot and draws the grid's ticket. One address
# taking every CTA's atomics serialised them: 81920 CTAs at Kimi Linear's lm head cost 73 us more
# than the argmax launch they saved; in two levels 47 us (bench/RESULTS.md, the real-size batch-1
# step): each CTA's fenced atomics still lengthen it, so the fold stays off. Each group's keys and
# ticket take a 128-byte line of their own (ARGMAX_SLOT 32-bit words): row 0 the grid's, row 1 + g
# group g's.
ARGMAX_GROUPS = 64
ARGMAX_SLOT = 32


def argmax_groups(ctas: int) -> int:
    """The argmax epilogue's ticket groups at a grid of `ctas` CTAs."""
    return min(ARGMAX_GROUPS, ctas)


# A norm in the row products' prologue (`norm`): each CTA sums the squares of the whole activation
# rows itself, on the CUDA-core path only (the tensor cores' fragments are loaded packed). A thread's
# share of the rows is at most NORM_HELD_VECTORS 16-byte vectors: the router's prologue holds them in
# registers until it has their scale; gemv's scales its sums afterwards and holds none, and keeps the
# bound as the shapes its GPU cases were checked at.
NORM_ROWS = GEMV_TENSOR_CORE_ROWS - 1
NORM_HELD_VECTORS = 8
# The most outputs a gemv taking a norm in its prologue may have (None: any): every CTA re-reads the
# rows, so a wide product (an lm head's 163840 outputs, 20480 CTAs of 8) reads them from L2 by the
# hundred MB.
NORM_PROLOGUE_OUTPUTS: int | None = None


def norm_held_vectors(rows: int, width: int, warps: int = GEMV_WARPS) -> int:
    """16-byte vectors of the activation rows one thread holds in a norm prologue of `warps` warps."""
    return rows * -(-(width // VECTOR) // (WARP * warps))


# A norm riding in a gemv launch (fold-norm-into-latent: the latent row's norm in the query's absorption gemv): one
# CTA more a row, whose first warp holds the row's h in registers, 8 values a vector and lane: at most this wide.
RIDER_MAX_WIDTH = 2048


@dataclass(frozen=True)
class RiderSpec(Spec):
    """A norm riding in a gemv launch: `rows` of `width` values (0: none), `eps`, read `x_pitch` apart."""

    kernel: ClassVar[str] = "gemv norm rider"
    rows: int
    width: int
    eps: float = 1e-6
    x_pitch: int | None = None

    def problems(self) -> list[str]:
        if not self.width:
            return []
        found = list(filter(None, [vector_width("width", self.width)]))
        if self.width > RIDER_MAX_WIDTH:
            found.append(f"width {self.width}: at most RIDER_MAX_WIDTH ({RIDER_MAX_WIDTH}), a warp holds the row")
        if not self.eps > 0:
            found.append(f"eps must be positive; got {self.eps}")
        if self.x_pitch is not None:
            found += filter(None, [row_pitch("x pitch", self.x_pitch, self.width)])
        return found


# The chunks gemv's combine prologue merges at most: a thread holds every chunk's slice (16 at 127 registers;
# 64 spill at 255).
COMBINE_PROLOGUE_SPLITS = 16


@dataclass(frozen=True)
class CombinePrologueSpec(Spec):
    """gemv's combine prologue (LATENT_COMBINE_IN_GEMV): `splits` chunks' partial rows (`partials`) merged
    per head as the activation of a per-head product of `width`-value units (`per_head`), no other
    prologue or epilogue (`others`), on the CUDA cores (not `tensor_cores`)."""

    kernel: ClassVar[str] = "gemv combine prologue"
    splits: int
    partials: str
    width: int
    per_head: tuple | None
    x_pitch: int | None = None
    others: bool = False
    tensor_cores: bool = False

    def problems(self) -> list[str]:
        found = []
        if not 2 <= self.splits <= COMBINE_PROLOGUE_SPLITS:
            found.append(f"splits {self.splits}: 2 to COMBINE_PROLOGUE_SPLITS ({COMBINE_PROLOGUE_SPLITS}) chunks, "
                         "a thread holds a slice of each")
        if self.partials not in ATTENTION_PARTIALS:
            found.append(f"partials {self.partials!r}: one of {', '.join(ATTENTION_PARTIALS)}")
        if self.per_head is None or tuple(self.per_head)[1:] != (self.width, 0) or self.x_pitch is not None:
            found.append("the activation must be each head's whole unit of the merged rows (per_head (heads, "
                         f"{self.width}, 0), unpitched)")
        if self.others:
            found.append("no norm prologue, argmax or quantize epilogue beside it")
        if self.tensor_cores:
            found.append("only on the CUDA cores (a thread merges the slices it dots)")
        return found


def per_head_x_width(per_head: tuple[int, int, int] | None, width: int) -> int:
    """Values in one activation row of a product (`width` values a row), or of a per-head read's:
    every head's whole unit."""
    if per_head is None:
        return width
    heads, unit, _ = per_head
    return heads * unit


def per_head_problems(per_head: tuple[int, int, int], parts: Sequence[int], width: int) -> list[str]:
    """Why a per-head read (head h's outputs dot x[:, h * unit + offset:][:width]) does not fit a
    product of `parts` outputs."""
    heads, unit, offset = per_head
    found = []
    if len(parts) != 1:
        found.append(f"per-head read takes one part; got {len(parts)}")
    elif heads < 1 or sum(parts) % heads:
        found.append(f"per-head read: {sum(parts)} outputs do not split into {heads} heads")
    if unit % VECTOR or offset % VECTOR:
        found.append(f"per-head read: unit {unit} and offset {offset} must be multiples of {VECTOR} "
                     "(16-byte activation vectors)")
    if offset + width > unit:
        found.append(f"per-head read: offset {offset} + width {width} runs past the head's unit {unit}")
    return found


@dataclass(frozen=True)
class RowProductsSpec(Spec):
    """A launch of gemv (`kernel` "gemv", `parts` its products' output rows) or gated_gemv (one
    part: the hidden units): `rows` activation rows of `width` values, optionally a per-head read
    (`per_head` = heads, unit, offset: head h's outputs read x[:, h*unit + offset:][:width]) and
    an activation `x_pitch` (a part of a wider row, read in place)."""

    kernel: str
    rows: int
    width: int
    parts: tuple[int, ...]
    per_head: tuple[int, int, int] | None = None
    x_pitch: int | None = None
    norm: bool = False  # an RMS norm of the activation rows in the prologue (facts: NORM_ROWS)
    warps: int = GEMV_WARPS
    argmax: bool = False  # the argmax of each output row in the epilogue (argmax_problems)

    @property
    def outputs(self) -> int:
        return sum(self.parts)

    @property
    def x_width(self) -> int:
        """Values in one activation row."""
        return per_head_x_width(self.per_head, self.width)

    def problems(self) -> list[str]:
        found = []
        if not 1 <= self.rows <= GEMV_ROWS:
            found.append(f"takes 1-{GEMV_ROWS} rows a launch (a decode step's); got {self.rows}: the lowering runs "
                         f"more rows as several launches of {GEMV_ROWS}")
        if self.width < VECTOR or self.width % VECTOR:
            found.append(f"width {self.width} must be a positive multiple of {VECTOR}: weight rows are read as "
                         "16-byte vectors, so each row must start 16-byte aligned")
        if not self.parts or min(self.parts) < 1:
            found.append(f"parts {list(self.parts)}: each part needs at least one output row")
        if self.per_head is not None:
            found += per_head_problems(self.per_head, self.parts, self.width)
        if self.x_pitch is not None:
            found += filter(None, [row_pitch("x pitch", self.x_pitch, self.x_width)])
        if self.norm:
            found += self.norm_problems()
        if self.argmax:
            found += self.argmax_problems()
        return found

    def argmax_problems(self) -> list[str]:
        """Why the argmax of each output row cannot run in this launch's epilogue (none: it can):
        each CTA keys its outputs' best (the value's order, then the smaller index) into one 64-bit
        atomic minimum a row, and the CTA that ends the grid writes the index."""
        found = []
        if self.rows >= GEMV_TENSOR_CORE_ROWS:
            found.append(f"argmax epilogue: {self.rows} rows take the tensor cores (from {GEMV_TENSOR_CORE_ROWS}), "
                         "whose outputs are spread over MMA fragments; the epilogue is the CUDA-core path's")
        if len(self.parts) != 1 or self.per_head is not None:
            found.append("argmax epilogue: the product's output row is its one part, every value a candidate")
        return found

    def norm_problems(self) -> list[str]:
        """Why a norm of the activation rows cannot run in this launch's prologue (none: it can)."""
        found = []
        if self.rows > NORM_ROWS:
            found.append(f"norm prologue: {self.rows} rows are above the {NORM_ROWS} of the CUDA-core path (from "
                         f"{GEMV_TENSOR_CORE_ROWS} rows the tensor cores load the activation as packed fragments)")
        if self.per_head is not None:
            found.append("norm prologue: a per-head read takes a part of each row, the norm needs whole rows")
        held = norm_held_vectors(self.rows, self.width, self.warps)
        if held > NORM_HELD_VECTORS:
            found.append(f"norm prologue: {self.rows} rows of {self.width} over {self.warps} warps hold {held} "
                         f"vectors a thread, above the {NORM_HELD_VECTORS} its registers take")
        if NORM_PROLOGUE_OUTPUTS is not None and sum(self.parts) > NORM_PROLOGUE_OUTPUTS:
            found.append(f"norm prologue: {sum(self.parts)} outputs are above the {NORM_PROLOGUE_OUTPUTS} whose CTAs "
                         "may each re-read the rows")
        return found


# ----------------------------------------------------------------------------------------------
# The quantized form on the device (quantize.py, q8_gemv.py)

Q8_0_BLOCK_BYTES = 34  # a q8_0 weight block as llama.cpp stores it: fp16 scale, then 32 int8 values
QUANT_WORDS = (1, 2)  # int8 words a quantized activation value: one, or a high and a residual word
# q8_gemv's weight rows a CTA where no schedule says and a row is one step of 9 warps (2304-wide rows:
# `q8_gemv.q8_default_schedule`), None: RowProducts' choice (2). 4 streams at 4.24 TB/s against 3.63 beyond
# about the same 2 us launch (bench/q8.py's floor set, H200, 2026-11-30: Kimi Linear's q8_0 lm head 112.3 ->
# 96.4 us); its q8 GPU cases, compute-sanitizer and kimi-b3-q8 --check passed at 4 (tests/gpu/session.sh `pending`).
Q8_ONE_STEP_ROWS_PER_CTA: int | None = 4
Q8_GATED_ROWS = GEMV_ROWS // 2  # activation rows a q8_gated_gemv launch: a warp reduces 2 weights x 16 rows of sums
# RowProducts' quantize epilogue where a block's outputs are spread over CTAs (each stages its sums
# and draws the block's ticket; the last quantizes it): measured 28-76% slower than the same launch
# without it at Llama-3.1-8B's o proj and gate+up pair, rows 1-8, one and two words, 2.9-68 us
# more where the standalone quantize it replaces takes 1.2-2.5 us (bench/q8.py, H200, 2026-11-30).
# The lane takes that epilogue only where a CTA owns whole blocks.
QUANTIZE_EPILOGUE_SHARED_COST = "28-76%"


def quantized_pitch(width: int, words: int) -> int:
    """Bytes a quantized activation row takes: its `words` planes of `width` int8 values (word 1,
    then the residual word), then one fp32 scale a 32-value block (the residual's is that scale /
    254), padded to 16 bytes so every row starts 16-byte aligned."""
    return -(-(words * width + 4 * (width // 32)) // VECTOR_BYTES) * VECTOR_BYTES


def quantized_problems(width: int, words: int) -> list[str]:
    """Why rows of `width` values cannot be held as `words` int8 words a value (none: they can)."""
    found = []
    if words not in QUANT_WORDS:
        found.append(f"{words} words: a quantized activation value is one or two int8 words")
    if width < 32 or width % 32:
        found.append(f"width {width} must be whole 32-value blocks (the quantized form's block)")
    return found


# ----------------------------------------------------------------------------------------------
# gemm_tc: a batch's rows against a weight read once, on tensor cores

GEMM_MAX_ROWS = 256  # activation rows a launch: at most two row blocks of 128 (the MMA's M side)
# A product of this many rows or more runs on gemm_tc (where its facts take the shape), fewer on
# gemv. Measured on the H200 (bench/gemm.py with LANEC_GEMM_ROWS=8,16, 2026-11-30, the 13 Kimi
# Linear and Llama-3-8B products at gemm_tc's default schedule against gemv at its table's): at 16
# rows gemm_tc is 1.04-1.38x gemv on every product (kimi o proj 8.06 against 11.10 us, llama
# gate+up 60.64 against 77.39); at 8 rows 0.88-1.09x (kimi qkv 19.91 against 17.48), and the whole
# real-size Kimi step at batch 8 ran 6646 us with gemm_tc against 6613 with gemv. Below it, a shape
# runs on gemm_tc where the schedule table holds a gemm_tc entry for it, which bench/gemm.py writes
# only where its fastest schedule beat the gemv launch (`Lowering.tensor_cores`; at 8 rows on the
# H200, 2026-11-30: kimi o proj 7.15 against 8.99 us, and 10 more of the 13 shapes).
GEMM_FROM_ROWS = 16
GEMM_BLOCK_ROWS = 128  # activation rows one CTA multiplies (padded to whole 16-row MMA tiles)
GEMM_LOADS = ("copies", "tma", "producer")  # how the wgmma engine fills a stage (GemmSchedule.loads)
# The wgmma engine's loads where neither the schedule nor the table names them: a producer warpgroup for
# blocks of more than this many rows, else every thread's copies. Measured on the H200 (bench/gemm.py,
# 2026-11-30, `session.sh tma-table`): at 256 rows, at the default's own tile, splits and stages, the
# producer takes 14-16% off every product timed so (kimi qkv 33.75 to 28.92 us, dense gate 32.03 to
# 27.02, dense down 34.85 to 29.07, lm head 375.6 to 317.3; llama qkv 31.78 to 27.25, gate+up 118.7 to
# 100.6); at 128 rows and fewer the fastest loads differ from shape to shape, within a few percent.
GEMM_PRODUCER_ROWS = 128
GEMM_MULTICAST = (1, 2, 4)  # CTAs of a cluster sharing a stage's row box (GemmSchedule.multicast)
GEMM_ROW_BLOCKS = (32, 64, 128, 256)  # the activation rows a CTA a schedule may ask for (block_rows)
GEMM_MAX_SPLITS = 8  # K split over the CTAs of one cluster (the portable cluster size), reduced over DSMEM
# gemm_tc's stream-K (GemmSchedule.stream): a partial tile's fp32 slot in the plan's one workspace, as
# many slots as CTAs a launch may hold at once (one an SM: every CTA of such a launch is resident together)
GEMM_STREAM_SLOT = 128 * GEMM_MAX_ROWS
GEMM_ENGINES = ("mma", "wgmma")  # mma.sync (the default, verified) or Hopper's warpgroup MMA
# A per-head product (each head's outputs dot its own part of the activation row: the latent attention's absorption
# and expansion) runs on gemm_tc's wgmma engine, each CTA's weight tile inside one head (a head's outputs whole tiles
# of GEMM_HEAD_TILE), from this many rows (None: never; gemv's launches, GEMV_ROW_BLOCKS_FROM). At Kimi Linear's
# batch 256 the 14 per-head gemv launches took 19-20 us each for 3.8 us of bytes. Measured in the real-size Kimi
# Linear step on the H200 (bench/RESULTS.md, thirty-fourth session, two paired rounds): batch 256 -135 us (-0.55%),
# batch 64 -38 us (-0.27%); both plans' --check agree.
GEMM_PER_HEAD_FROM: int | None = 64
GEMM_HEAD_TILE = 64  # the smallest wgmma weight tile: a head's outputs come in whole ones


@dataclass(frozen=True)
class GemmSchedule(Schedule):
    """gemm_tc's knobs: weight rows (outputs) a CTA `tile_n` (64 or 128; on wgmma also 192 and 256,
    a consumer warpgroup a 64 rows), shared-memory `stages`
    of 64 K values (2-8), `splits` of K over a cluster (1-8), the tensor-core `engine` ("wgmma",
    the default: Hopper's warpgroup MMA from swizzled shared memory, 1.0-2.3x the other on every
    bench/gemm.py shape; "mma": mma.sync from ldmatrix) and `block_rows`, the most activation rows
    a CTA multiplies (32-256; a launch's rows split evenly into the fewest such blocks, each weight
    tile's blocks adjacent CTAs, so its second read comes from L2; the engine's own limit without
    it: all rows on wgmma, 128 on mma.sync); `loads`, how the wgmma engine fills its stages
    ("copies": every thread's cp.async, the default up to GEMM_PRODUCER_ROWS rows a block; "tma":
    one thread's cp.async.bulk.tensor a
    stage through the runtime's tensor maps, completing on the stage's mbarrier; "producer": the
    same copies issued by a producer warpgroup of its own, the consumers handing each stage back
    on an mbarrier, no CTA barrier a stage) and `multicast`, the CTAs of neighbouring weight tiles
    (a cluster, "producer" loads, no K split) that share each stage's row box: each loads 1 / multicast
    of its rows and multicasts them to all, so the activation is read from L2 once a cluster;
    `stream`, the CTAs of a stream-K launch (the weight tiles at most, SM_COUNT at most): the
    (weight tile, row block, K stage) units dealt out evenly over them, a tile's K cut between
    neighbouring CTAs summed through the plan's fp32 workspace (producer loads, no K split, no
    multicast); `occupancy`, the CTAs an SM the wgmma kernel is compiled to keep resident (2: each
    CTA's registers capped at half the file, its shared memory within half the SM's, so one CTA's
    prologue and epilogue overlap the other's K loop); None leaves the kernel's choice."""

    tile_n: int | None = None
    stages: int | None = None
    splits: int | None = None
    engine: str | None = None
    block_rows: int | None = None
    loads: str | None = None
    multicast: int | None = None
    stream: int | None = None
    occupancy: int | None = None

    def __post_init__(self) -> None:
        if self.occupancy is not None:
            _choice("GemmTc", "occupancy", self.occupancy, (1, 2), "1 or 2 CTAs an SM")
        if self.engine is not None:
            _choice("GemmTc", "engine", self.engine, GEMM_ENGINES, "'mma' or 'wgmma'")
        if self.tile_n is not None:
            _choice("GemmTc", "tile_n", self.tile_n, (64, 128, 192, 256), "64, 128, 192 or 256 weight rows a CTA")
        if self.stages is not None:
            _choice("GemmTc", "stages", self.stages, tuple(range(2, 9)), "2-8 shared-memory buffers")
        if self.splits is not None:
            _choice("GemmTc", "splits", self.splits, tuple(range(1, GEMM_MAX_SPLITS + 1)),
                    f"1-{GEMM_MAX_SPLITS} CTAs of a cluster splitting K")
        if self.block_rows is not None:
            _choice("GemmTc", "block_rows", self.block_rows, GEMM_ROW_BLOCKS,
                    "32, 64, 128 or 256 activation rows a CTA")
        if self.loads is not None:
            _choice("GemmTc", "loads", self.loads, GEMM_LOADS, "'copies', 'tma' or 'producer'")
        if self.multicast is not None:
            _choice("GemmTc", "multicast", self.multicast, GEMM_MULTICAST, "1, 2 or 4 CTAs a cluster sharing a row box")
        if self.stream is not None:
            _choice("GemmTc", "stream", self.stream, tuple(range(1, SM_COUNT + 1)),
                    f"1-{SM_COUNT} CTAs, one an SM (they wait on each other's partial tiles)")


PAIR_TILE = 64  # hidden values a gated pair tile: 64 gate rows beside their 64 up rows, one 128-row wgmma tile


def gated_pair_problems(hidden: int, gate_format: str, up_format: str) -> list[str]:
    """Why a gated pair of `hidden` units is not one gemm_tc launch of side-by-side tiles (each
    CTA's weight tile 64 gate rows beside the same 64 up rows, SwiGLU in the epilogue)."""
    found = []
    if gate_format != up_format:
        found.append(f"gate ({gate_format}) and up ({up_format}) formats differ")
    if hidden % PAIR_TILE:
        found.append(f"hidden width {hidden} is not whole pair tiles ({PAIR_TILE} gate beside {PAIR_TILE} up "
                     "rows, one wgmma tile)")
    return found


# q8_gemm_tc: a batch's rows quantized (int8 words) against q8_0 weight rows on tensor cores
# (int8 mma.sync, one m16n8k32 a 32-value block, scaled into fp32 after each). Its weight rows are
# the q8_0 blocks as planes (`q8_0_planes`: a row's int8 values back to back, then its fp16
# scales): rows start 16-byte aligned where the width is whole runs of Q8_GEMM_RUN values.
Q8_GEMM_RUN = 256


@dataclass(frozen=True)
class Q8GemmSpec(Spec):
    """A launch of q8_gemm_tc: y[rows, outputs] = x[rows, width] @ w[outputs, width]^T, x the
    quantized form of `words` int8 words a value, w q8_0 rows as planes, `parts` side by side."""

    kernel: ClassVar[str] = "q8_gemm_tc"
    rows: int
    width: int
    parts: tuple[int, ...]
    words: int = 1

    def problems(self) -> list[str]:
        found = quantized_problems(self.width, self.words) + batch_product_problems(self.rows, self.parts)
        if self.width % Q8_GEMM_RUN:
            found.append(f"width {self.width}: whole runs of {Q8_GEMM_RUN} values, so that each q8_0 row's planes "
                         f"({self.width} values, then {self.width // 16} bytes of scales) start 16-byte aligned")
        return found


def batch_product_problems(rows: int, parts: tuple[int, ...]) -> list[str]:
    """What gemm_tc and q8_gemm_tc both refuse: more rows than a launch takes, an empty part, and
    outputs that are no whole 8-byte stores."""
    found = [] if 1 <= rows <= GEMM_MAX_ROWS else [
        f"takes 1-{GEMM_MAX_ROWS} rows a launch (two blocks of {GEMM_BLOCK_ROWS}); got {rows}"]
    if not parts or min(parts) < 1:
        found.append(f"parts {list(parts)}: each part needs at least one output row")
    elif sum(parts) % VECTOR:
        found.append(f"outputs {sum(parts)} must be a multiple of {VECTOR}: a thread stores 4 outputs of a row as "
                     "8 bytes, rows 16-byte aligned")
    return found


@dataclass(frozen=True)
class GemmSpec(Spec):
    """A launch of gemm_tc: y[rows, outputs] = x[rows, width] @ w[outputs, width]^T, `parts` the
    outputs of several products of one activation side by side, x rows `x_pitch` apart. `gated`:
    w is a gated pair's gate and up rows interleaved in tiles of `PAIR_TILE` (one part of 2 x hidden
    rows) and y = silu(gate) * up, [rows, hidden]."""

    kernel: ClassVar[str] = "gemm_tc"
    rows: int
    width: int
    parts: tuple[int, ...]
    per_head: tuple[int, int, int] | None = None
    x_pitch: int | None = None
    gated: bool = False
    out_dtype: str = "bfloat16"

    @property
    def outputs(self) -> int:
        return sum(self.parts)

    @property
    def x_width(self) -> int:
        """Values in one activation row."""
        return per_head_x_width(self.per_head, self.width)

    def problems(self) -> list[str]:
        found = batch_product_problems(self.rows, self.parts)
        found += filter(None, [vector_width("width", self.width)])
        if self.per_head is not None:
            found += per_head_problems(self.per_head, self.parts, self.width)
            heads = self.per_head[0]
            if not found and (self.outputs // heads) % GEMM_HEAD_TILE:
                found.append(f"per-head read: a head's {self.outputs // heads} outputs must be whole weight tiles of "
                             f"{GEMM_HEAD_TILE} (a CTA's tile reads one head's activation part)")
            if self.gated:
                found.append("a gated pair reads no per-head part")
        if self.x_pitch is not None:
            found += filter(None, [row_pitch("x pitch", self.x_pitch, self.x_width)])
        if self.gated:
            if len(self.parts) != 1 or self.outputs % 2:
                found.append(f"a gated pair is one part of gate and up rows; got parts {list(self.parts)}")
            else:
                found += gated_pair_problems(self.outputs // 2, "bf16", "bf16")
        if self.out_dtype not in ("bfloat16", "float32"):
            found.append(f"stores bfloat16 or float32 outputs; got {self.out_dtype!r}")
        elif self.out_dtype == "float32" and self.gated:
            found.append("a gated pair stores its SwiGLU as bfloat16")
        return found


# A product in parts gives each part a place of whole 16-byte vectors of bf16 in the merged row, so
# every part starts aligned for a later kernel that reads it in place (a vector load), whatever
# its size (a KDA layer's b part is one value a head); the weight's zero rows fill the gaps.
PART_ALIGN = VECTOR


def part_places(parts: Sequence[int]) -> list[int]:
    """Each part's place in a product in parts' merged row: its outputs rounded up to PART_ALIGN
    (one part: its own width)."""
    return list(parts) if len(parts) == 1 else [-(-n // PART_ALIGN) * PART_ALIGN for n in parts]


def batch_parts_problems(rows: int, width: int, outputs: Sequence[int], formats: Sequence[str]) -> list[str]:
    """Why products in parts of one activation (`outputs` rows each, weight `formats`) above a gemv
    launch's rows are not one tensor-core launch in parts: one weight buffer of one format, the
    parts side by side at their places (`part_places`: any count, any size), and gemm_tc's facts
    at those places (rows past a launch's are more launches of the same parts). q8_0 rows read
    quantized run on q8_gemm_tc, whose parts are the same; where its own facts refuse a shape the
    lowering takes gemv launches."""
    found = []
    if len(set(formats)) > 1:
        found.append(f"the parts mix formats ({', '.join(sorted(set(formats)))})")
    launch = GemmSpec(min(rows, GEMM_MAX_ROWS), width, tuple(part_places(outputs)))
    return found + launch.problems()


# ----------------------------------------------------------------------------------------------
# rmsnorm, elementwise, embed, argmax

RMSNORM_MAX_THREADS = 1024  # one CTA a row
RMSNORM_MAX_STEPS = 8  # 16-byte vectors a thread holds of its row (4 registers each, fp32 values 8 each)
RMSNORM_MAX_WIDTH = RMSNORM_MAX_STEPS * RMSNORM_MAX_THREADS * VECTOR


@dataclass(frozen=True)
class RmsNormSpec(Spec):
    """A launch of rmsnorm: `rows` of `width` values, `eps`, x rows `x_pitch` apart, y written
    bf16 or (`quantize` words) in the quantized form a product by q8_0 rows reads; `gather`: x a table
    of that many rows (an embed folded in), row r's input its row tokens[r], without a `residual`."""

    kernel: ClassVar[str] = "rmsnorm"
    rows: int
    width: int
    eps: float = 1e-6
    x_pitch: int | None = None
    quantize: int = 0  # words a value of the quantized form y is written in (0: bf16 y)
    gather: int | None = None  # the embed table's rows where the norm gathers its input rows (None: it does not)
    residual: bool = False
    slots: int = 0  # x is a grouped mixture's fp32 partial rows, this many a row, summed first (0: x is bf16 rows)

    def problems(self) -> list[str]:
        found = [] if self.rows >= 1 else [f"needs at least one row; got {self.rows}"]
        found += filter(None, [vector_width("width", self.width)])
        if self.gather is not None and (self.gather < 1 or self.residual or self.x_pitch is not None):
            found.append(f"gathers rows of a table of at least one row, without a residual or an x pitch; got "
                         f"{self.gather} rows, residual {self.residual}, x pitch {self.x_pitch}")
        if self.slots and (self.slots < 1 or self.gather is not None or self.x_pitch is not None):
            found.append(f"sums a mixture's partial rows, at least one a row, without a gather or an x pitch; got "
                         f"{self.slots} slots, gather {self.gather}, x pitch {self.x_pitch}")
        if self.quantize:
            found += [f"its quantize epilogue: {problem}" for problem in quantized_problems(self.width, self.quantize)]
        if not self.eps > 0:
            found.append(f"eps must be positive; got {self.eps}")
        if self.x_pitch is not None:
            found += filter(None, [row_pitch("x pitch", self.x_pitch, self.width)])
        if self.width > RMSNORM_MAX_WIDTH:
            found.append(f"width {self.width} exceeds {RMSNORM_MAX_WIDTH}: a row must fit the registers of one CTA")
        return found


ELEMENTWISE_OPERANDS = {"add": 2, "mul": 2, "swiglu": 2, "silu": 1, "sigmoid": 1}


@dataclass(frozen=True)
class ElementwiseSpec(Spec):
    """A launch of elementwise: `op` over `rows` x `width` values, out bf16 or (`quantize` words)
    in the quantized form a product by q8_0 rows reads."""

    kernel: ClassVar[str] = "elementwise"
    op: str
    rows: int
    width: int
    quantize: int = 0  # words a value of the quantized form out is written in (0: bf16 out)

    def problems(self) -> list[str]:
        found = []
        if self.op not in ELEMENTWISE_OPERANDS:
            found.append(f"op {self.op!r}: the lane has {', '.join(ELEMENTWISE_OPERANDS)}")
        if self.rows < 1:
            found.append(f"needs at least one row; got {self.rows}")
        if self.quantize:
            found += [f"its quantize epilogue: {problem}" for problem in quantized_problems(self.width, self.quantize)]
        return found + list(filter(None, [vector_width("width", self.width)]))


@dataclass(frozen=True)
class EmbedSpec(Spec):
    """A launch of embed: `rows` tokens into a [`vocab`, `width`] table."""

    kernel: ClassVar[str] = "embed"
    rows: int
    vocab: int
    width: int

    def problems(self) -> list[str]:
        found = []
        if self.rows < 1 or self.vocab < 1:
            found.append(f"needs at least one row and one token; got rows {self.rows}, vocab {self.vocab}")
        return found + list(filter(None, [vector_width("width", self.width)]))


@dataclass(frozen=True)
class RopeSpec(Spec):
    """A launch of rope: `rows` of `heads` x `unit` values, each head's `rotary` values from
    `offset` turned at base `theta`, in rotate-half pairs (i, i + rotary/2) or, `interleaved`,
    (2i, 2i + 1); `scaling` the form's frequency scaling as a dict (`kind` "llama3" or "yarn" and
    that kind's properties, docs/semantics.md), None for the unscaled frequencies; x rows
    `x_pitch` apart, out rows `out_pitch` apart."""

    kernel: ClassVar[str] = "rope"
    rows: int
    heads: int
    unit: int
    rotary: int
    theta: float = 10000.0
    x_pitch: int | None = None
    out_pitch: int | None = None
    offset: int = 0
    interleaved: bool = False
    scaling: Mapping | None = None

    def frequencies(self):
        """(inv_freq [rotary / 2] fp32, the magnitude cos and sin are multiplied by: yarn's
        attention factor, else 1.0), computed on the host by the interpreter's own function."""
        import numpy

        from lanec.interp.ops import frequencies

        if self.scaling is None:
            return frequencies(self.rotary, self.theta), 1.0
        given = {k: v for k, v in self.scaling.items() if k not in ("kind", "attention_factor")}
        table = frequencies(self.rotary, self.theta, self.scaling.get("kind"), **given)
        magnitude = self.scaling.get("attention_factor") if self.scaling.get("kind") == "yarn" else 1.0
        return table, float(numpy.float32(magnitude))

    def problems(self) -> list[str]:
        found = []
        if self.rows < 1 or self.heads < 1:
            found.append(f"needs at least one row and one head; got rows {self.rows}, heads {self.heads}")
        if self.rotary < 2 or self.rotary % 2 or self.offset < 0 or self.offset + self.rotary > self.unit:
            found.append(f"rotary {self.rotary} must be even and 2..unit ({self.unit}) less the offset "
                         f"({self.offset}): it turns pairs of each head's [offset, offset + rotary)")
        if self.interleaved and (self.offset % 2 or self.unit % 2):
            found.append(f"interleaved pairs need an even offset and unit (got {self.offset}, {self.unit}): "
                         "both values of a pair move in one vector")
        if not 0.0 < self.theta < float("inf"):
            found.append(f"theta {self.theta} must be a positive finite base (angles pos * theta^(-2i/rotary))")
        width = self.heads * self.unit
        for what, pitch in (("x pitch", self.x_pitch), ("out pitch", self.out_pitch)):
            if pitch is not None:
                found += filter(None, [row_pitch(what, pitch, width)])
        if self.scaling is not None and not found:
            found += self.scaling_problems()
        return found

    def scaling_problems(self) -> list[str]:
        """The scaling's own problems: an unknown kind or field, or one the frequencies refuse."""
        kind = self.scaling.get("kind")
        if kind not in ("llama3", "yarn"):
            return [f"scaling kind {kind!r}: \"llama3\" or \"yarn\""]
        known = ("kind", "factor", "original_context", "low_freq_factor", "high_freq_factor", "beta_fast",
                 "beta_slow", "truncate", "attention_factor")
        unknown = sorted(set(self.scaling) - set(known))
        if unknown:
            return [f"scaling {kind} takes no {', '.join(unknown)}"]
        if kind == "yarn" and not (self.scaling.get("attention_factor") or 0) > 0:
            return ["scaling yarn needs a positive attention_factor (on cos and sin)"]
        try:
            table, _ = self.frequencies()
        except ValueError as error:  # the interpreter's one-line refusal
            return [f"scaling: {error}"]
        if not all(0 < f < float("inf") for f in table.tolist()):
            return [f"scaling {kind} gives frequencies that are not positive and finite"]
        return []


ARGMAX_DTYPES = ("bfloat16", "float32")
# CTAs a row of argmax: one (the CTA scans the whole row), or a cluster of up to ARGMAX_MAX_CLUSTER that each
# scan an interleaved share and meet over DSMEM. A row of 163840 bf16 logits is five rounds of four 16-byte loads
# a thread on one CTA; on 8 it is one. Measured on the H200 (2026-11-30, bench/step_chain.py, one run): the
# KDA-only step at one request 290.5 -> 287.3 us with 8; dense-small (32000 logits, one round on one CTA)
# 125.6 -> 126.7 us, slower. So a row takes the cluster only where one CTA would need more than one round,
# and only while the rows' clusters fit the SMs in one wave (kernels/argmax.py's `default_cluster`: measured
# at one row; at 64 or 256 rows a CTA a row already spreads over the chip).
ARGMAX_CLUSTER = 8
ARGMAX_MAX_CLUSTER = 8  # a portable cluster


@dataclass(frozen=True)
class ArgmaxSpec(Spec):
    """A launch of argmax: `rows` of `vocab` logits of `dtype`."""

    kernel: ClassVar[str] = "argmax"
    rows: int
    vocab: int
    dtype: str = "bfloat16"
    cluster: int = 1

    def problems(self) -> list[str]:
        if self.dtype not in ARGMAX_DTYPES:
            return [f"reads {' or '.join(ARGMAX_DTYPES)} logits; got {self.dtype!r}"]
        found = [] if self.rows >= 1 else [f"needs at least one row; got {self.rows}"]
        if not 1 <= self.cluster <= ARGMAX_MAX_CLUSTER:
            found.append(f"a row's CTAs are one cluster of 1 to {ARGMAX_MAX_CLUSTER}; got {self.cluster}")
        per_vector = VECTOR_BYTES // storage(self.dtype).itemsize
        return found + list(filter(None, [vector_width("vocab", self.vocab, per_vector, self.dtype)]))


# ----------------------------------------------------------------------------------------------
# KdaSplit

KDA_HEAD = 128  # head size: 128 main threads, one key and one value channel a thread
KDA_MAX_TOKENS = 8  # the decay barrier expects 512 bytes per token, sent for at most 8 tokens a request
KDA_CONV_WIDTH = 4  # the conv keeps 3 taps of state a channel, then the new input
KDA_GATE_WIDTH = 128  # f_a's output: the F_B projection's input, read as 16-byte vectors
KDA_GATE_FORMS = ("lower_bound", "softplus")
# Rows (requests x tokens) up to which fold-gate-product folds a kda's output gate product into KdaSplit. At one
# row the gate warps do it off the main threads' path: kimi-kda-b1 295.5 -> 292.9 us, the real-size batch-1 step
# 2091.5 -> 2069.5 us (20 launches fewer); at 64 requests each request's CTAs read the head's 32 KB of rows where
# g_b's own launch read the weight once: kimi-kda-b64 507.5 -> 531.6 us (H200, 2026-11-30, bench/RESULTS.md).
KDA_GATE_FOLD_ROWS = 1
KDA_GATE_MODES = (0, 1, 2)  # F_B's reduction order: one MMA chain, four chains, FMA partials
# The mode the lowering gives every KdaSplit launch: 0, the one chain of eight MMAs the tests and benches measured
# first. Mode 1 (four chains of two, then three adds) shortens the gate warp's dependent chain before the decays the
# main threads wait on; in the real-size batch-1 step it measured even (1817.5 / 1812.2 against 1812.4 / 1816.5 us,
# H200, bench/RESULTS.md 2026-12-03), so 0 stays.
KDA_GATE_MODE = 0


@dataclass(frozen=True)
class KdaSplitSpec(Spec):
    """A launch of KdaSplit: `heads` of `head_size` values, `batch` requests of `tokens` each, a
    conv of `conv_width`, the gate's `gate_form` and `gate_mode`, its `schedule`, the row pitches
    of x (q, k, v), of the raw gate (f_a's output) and of beta (parts of a wider row, read in
    place) and the state pools' `slots`. A rule knows the first five from the form; the lowering
    sets the rest. `gate_rank` (with `gate_format`, its weight's, and `gate_pitch`, its input's row
    pitch): the output gate as a folded product of that rank (fold-gate-product), None where the
    gate is read whole."""

    kernel: ClassVar[str] = "KdaSplit"
    heads: int
    batch: int
    tokens: int = 1
    head_size: int = KDA_HEAD
    conv_width: int = KDA_CONV_WIDTH
    gate_form: str = "lower_bound"
    gate_mode: int = 0
    schedule: KdaSchedule = field(default_factory=KdaSchedule)
    x_pitch: int | None = None
    raw_gate_pitch: int | None = None
    beta_pitch: int | None = None
    slots: int | None = None
    gate_rank: int | None = None
    gate_format: str = "bf16"
    gate_pitch: int | None = None

    def problems(self) -> list[str]:
        found = self.gate_problems()
        if self.head_size != KDA_HEAD:
            found.append(f"head size {self.head_size}: its {KDA_HEAD} main threads hold a key and a value channel "
                         f"each, so a head is {KDA_HEAD} values")
        if not 1 <= self.tokens <= KDA_MAX_TOKENS:
            # the gate stage sends decays for tokens 2 * quarter + column (at most 8), while the decay
            # barrier expects 512 bytes per token: more tokens would never arrive
            found.append(f"supports 1-{KDA_MAX_TOKENS} tokens per request; got {self.tokens}")
        if self.conv_width != KDA_CONV_WIDTH:
            found.append(f"conv width {self.conv_width}: the conv keeps {KDA_CONV_WIDTH - 1} taps of state, so "
                         f"width must be {KDA_CONV_WIDTH}")
        if self.heads < 1 or self.batch < 1:
            found.append(f"needs at least one head and one request; got heads {self.heads}, batch {self.batch}")
        if self.gate_mode not in KDA_GATE_MODES:
            found.append(f"gate_mode is 0 (one MMA chain), 1 (four chains) or 2 (FMA partials); got "
                         f"{self.gate_mode}")
        if self.gate_form not in KDA_GATE_FORMS:
            found.append(f"gate_form is one of {KDA_GATE_FORMS}; got {self.gate_form!r}")
        found += self.schedule_problems()
        dim = self.heads * self.head_size
        if self.x_pitch is not None and (self.x_pitch < 3 * dim or self.x_pitch % VECTOR):
            found.append(f"x_pitch {self.x_pitch} must be >= 3 * dim ({3 * dim}) and a multiple of {VECTOR} "
                         "(rows stay 16-byte aligned)")
        if self.raw_gate_pitch is not None and (self.raw_gate_pitch < KDA_GATE_WIDTH or self.raw_gate_pitch % VECTOR):
            found.append(f"raw_gate_pitch {self.raw_gate_pitch} must be >= {KDA_GATE_WIDTH} and a multiple of "
                         f"{VECTOR} (the gate warp reads 16-byte vectors)")
        if self.beta_pitch is not None and self.beta_pitch < self.heads:
            found.append(f"beta_pitch {self.beta_pitch} must be >= heads ({self.heads})")
        if self.slots is not None and self.slots < 2:
            found.append(f"needs at least 2 state slots (slot 0 is padding); got {self.slots}")
        return found

    def gate_problems(self) -> list[str]:
        """What KdaSplit cannot do with a folded output gate product (its gate warps multiply rows of
        KDA_GATE_WIDTH bf16 values by the row's input, or with 64 rows a CTA or more its output CTA's
        threads dot one row each)."""
        if self.gate_rank is None:
            return []
        found = []
        if self.gate_rank != KDA_GATE_WIDTH:
            found.append(f"folds output gate products of rank {KDA_GATE_WIDTH} (rows of {KDA_GATE_WIDTH} bf16 "
                         f"values, the gate warp's MMA width); this one has rank {self.gate_rank}")
        if self.gate_format != "bf16":
            found.append(f"folds output gate products of bf16 rows; this one's are {self.gate_format}")
        if self.gate_pitch is not None and (self.gate_pitch < KDA_GATE_WIDTH or self.gate_pitch % VECTOR):
            found.append(f"gate_pitch {self.gate_pitch} must be >= {KDA_GATE_WIDTH} and a multiple of {VECTOR} "
                         "(16-byte vectors)")
        return found

    def schedule_problems(self) -> list[str]:
        """What the schedule cannot do with this gate mode and token count."""
        early, cluster = self.schedule.early, self.schedule.cluster
        found = []
        if self.gate_mode == 2 and (early or cluster != KdaSchedule.for_shape(self.heads, self.batch).cluster):
            found.append("gate_mode 2 keeps one decay a lane (at most 32 rows per CTA, the default cluster) and "
                         "loads F_B itself: it takes neither early loads nor a cluster other than the default")
        if self.tokens > 1 and (early >= 2 or self.gate_mode == 2 or cluster == 16):
            found.append(f"with {self.tokens} tokens: staged state (early 2/3) holds one token's pass, gate mode 2 "
                         "projects one column and a cluster of 16 leaves 8 features a CTA (one MMA row group): "
                         "speculative steps need early <= 1, gate mode 0/1 and cluster <= 8")
        return found


# ----------------------------------------------------------------------------------------------
# attention (GQA decode over a paged cache) and its split-KV combine

ATTENTION_HEADS = (64, 128, 256)  # head sizes: whole 16-byte vectors, a PV accumulator of <= 64 floats a thread
ATTENTION_PAGES = (16, 32, 64)  # cache page sizes (positions a page)
ATTENTION_MAX_GROUP = 16  # query heads a KV head
ATTENTION_MAX_TOKENS = 8  # speculative tokens a request
ATTENTION_LOADS = ("copy", "bulk")  # 16-byte cp.async a thread (the default) or bulk copies on mbarriers
# how split-KV chunks meet: a second launch (attention_combine, the default) or inside the attention's
# own launch, its chunks one cluster whose CTAs read each other's partial rows from shared memory
ATTENTION_COMBINES = ("launch", "cluster")
ATTENTION_CLUSTER_SPLITS = 8  # a cluster's CTAs without the non-portable cluster size attribute
# the element of a split attention's normalized partial rows, which attention_combine reads back: fp32 (the
# default), or bf16 (the wgmma latent attention only), which halves their bytes: at Kimi Linear's batch 1 and
# 32k keys, 128 chunks x 32 heads x 512 values are 8.4 MB written and read beside a 34 MB cache
ATTENTION_PARTIALS = ("float32", "bfloat16")
# what the lowering gives a split wgmma latent attention: bf16, measured on the H200 against fp32 in one run
# (bench/RESULTS.md, 2026-12-01, eighteenth session): 1.00-1.15x on all 19 split MLA rows, none slower (Kimi
# Linear 32k batch 1: 25.3 -> 24.4 us; DeepSeek-V3 32k batch 1: 44.3 -> 40.9 us)
LATENT_PARTIALS = "bfloat16"
# A split absorbed latent attention's chunks merged where its values are expanded (gemv's combine prologue,
# `CombinePrologueSpec`): each CUDA-core thread of the value gemv merges its head's slices as attention_combine
# would (the same bf16 values) before it dots them, so the combine's launch is gone (7 a step at Kimi Linear's real
# size, about 1.9 us each in the batch-1 graph profile). Where the value gemv is not one CUDA-core launch (from
# GEMV_TENSOR_CORE_ROWS rows) or the chunks pass COMBINE_PROLOGUE_SPLITS, the combine stays a launch. False: always a
# launch. Measured on the H200 (bench/model.py, real-size Kimi Linear batch 1 at 1k keys, 16 chunks, three rounds in
# one command; bench/RESULTS.md, twenty-fifth session): 1874.6 / 1869.7 / 1873.5 us with the launch, 1868.6 / 1870.7
# / 1871.0 without it: -2.5 us, inside the rounds' spread (the gemv's merge costs most of the launch it saves), 7
# launches fewer. On, since it is not slower.
LATENT_COMBINE_IN_GEMV = True
# GQA's page-table entries a chunk reads, staged in shared memory once (at most this many: 1 KB, so two CTAs
# still share an SM) instead of one global load a copy on every tile, which ncu found the batch-1 kernel's
# top stall (bench/RESULTS.md, 2026-12-01); a chunk of more pages looks each up as it copies
ATTENTION_STAGED_PAGES = 256
# the latent attention's tile loop: mma.sync from ldmatrix'd registers (eight warps) or one or two
# warpgroups' wgmma from swizzled shared memory (latent_wgmma.py; LATENT_ENGINE picks the default)
ATTENTION_ENGINES = ("mma", "wgmma")
# latent_attention's engine where its schedule names none (and asks for none of the mma engine's knobs:
# tile, stages, warps, bulk loads, the cluster combine). Measured on the H200 (bench/attention.py with
# LANEC_ATTN_MMA=1, 2026-11-30): wgmma 0.96-2.24x the mma.sync kernel on the 21 MLA rows, faster on 20
# (Kimi Linear 32k batch 64: 1060.5 -> 703.2 us, 74% of the roofline; DeepSeek-V3 32k batch 64: 4027.2 ->
# 1799.8 us)
LATENT_ENGINE = "wgmma"
# warpgroups of a wgmma latent attention block where its query rows pass 32 (each its 32-row share, the
# chunks they read shared): DeepSeek-V3's 128 heads in 2 blocks of 64 rows, not 4 of 32. Measured on the
# H200 (bench/attention.py, 2026-11-30): DeepSeek-V3 32k batch 64 2881.7 -> 1799.8 us, Kimi Linear's 4
# speculative tokens at 32k batch 8 419.2 -> 282.4 us
LATENT_WARPGROUPS = 2
LATENT_WARPGROUP_ROWS = 32  # query rows a wgmma latent warpgroup holds (its 512 x 32 output in registers)
LATENT_BLOCK_ROWS = (8, 16, 32)  # the rows a block the schedule's `block_rows` may name (whole 8-row wgmma N steps)


def latent_wgmma_blocks(rows: int, most: int | None = None) -> tuple[int, int, int]:
    """(warpgroups, blocks, rows a block) of a wgmma latent attention over `rows` query rows a
    request (heads x tokens): one warpgroup up to LATENT_WARPGROUP_ROWS rows, else blocks of
    LATENT_WARPGROUPS warpgroups, the rows spread evenly over the fewest blocks; with `most` (the
    schedule's `block_rows`), blocks of one warpgroup and at most `most` rows."""
    groups = 1 if most is not None or rows <= LATENT_WARPGROUP_ROWS else LATENT_WARPGROUPS
    blocks = -(-rows // (most or LATENT_WARPGROUP_ROWS * groups))
    return groups, blocks, -(-rows // blocks)


# A wgmma latent attention whose chunk of the longest context the page table holds spans at least this many
# tiles of LATENT_TILE_KEYS keys compiles the unchecked path of whole cache tiles: copies without the position
# checks, scores without the mask, the accumulators rescaled only where a max moved. Measured on the H200
# (bench/RESULTS.md, 2026-11-30): 1.05-1.24x at 256 keys a chunk and up; at 2 tiles a chunk (the real-size
# step at 1k keys) the larger loop cost about 1 us a layer.
LATENT_UNCHECKED_TILES = 4
LATENT_TILE_KEYS = 64  # keys a wgmma latent attention tile: the scores' M side


def latent_unchecked(context: int, splits: int) -> bool:
    """Whether a wgmma latent attention over `context` keys a request in `splits` chunks compiles the
    unchecked path of whole cache tiles (LATENT_UNCHECKED_TILES)."""
    return -(-context // splits) >= LATENT_UNCHECKED_TILES * LATENT_TILE_KEYS


def latent_engine_reason(rows: int, context: int | None = None, splits: int = 1, most: int | None = None) -> str:
    """The latent attention's engine for `rows` query rows a request, and its blocks (of at most `most`
    rows: the schedule's `block_rows`) (`lanec explain`)."""
    if LATENT_ENGINE != "wgmma":
        return f"engine {LATENT_ENGINE} (LATENT_ENGINE)"
    groups, blocks, block_rows = latent_wgmma_blocks(rows, most)
    why = (f"engine wgmma (LATENT_ENGINE, measured: bench/attention.py): {blocks} block{'s' * (blocks > 1)} of "
           f"{block_rows} query rows a request, {groups} warpgroup{'s' * (groups > 1)} a block"
           + (f" (block_rows {most})" if most else ""))
    if context is None:
        return why
    keys = -(-context // splits)
    fact = f"{LATENT_UNCHECKED_TILES} tiles of {LATENT_TILE_KEYS} (LATENT_UNCHECKED_TILES, measured)"
    if latent_unchecked(context, splits):
        return f"{why}; whole cache tiles unchecked: chunks of {keys} keys, at least {fact}"
    return f"{why}; every tile checked: chunks of {keys} keys, under {fact}"


VALUE_PAIR = 2  # the seed's fact: values in place are read a pair at a time (even place and pitch)
ROWS_A_BLOCK = 64  # query rows one attention block holds at most: a KV head's group x its tokens


def values_in_place_problems(place: int, pitch: int, row: str) -> list[str]:
    """Why an attention cannot read its values in place at `place` of a wider `row`, `pitch`
    values a row (the lowering then places every part of a product in parts at whole 16-byte
    vectors, which the kernels' 16-byte copies read)."""
    found = []
    if place % VALUE_PAIR:
        found.append(f"the values' place {place} in {row} is odd")
    if pitch % VALUE_PAIR:
        found.append(f"the pitch {pitch} of {row} is odd")
    return found


@dataclass(frozen=True)
class AttentionSchedule(Schedule):
    """The decode attentions' knobs: the keys of one shared-memory `tile` (32, 64 or 128; None:
    64), its `stages` (2-4 buffers; None: 3, or 2 where 3 would pass 160 KB) and the `warps` a
    CTA (4 or 8; None: 8 for a value width of 512 and more, else 4). A warp takes tile / warps
    keys of the scores (whole 8-key MMA tiles) and value width / warps output columns (whole
    pairs of 8-column MMA tiles). `loads` is the engine that fills the buffers: "copy" (None:
    every thread's 16-byte cp.async) or "bulk" (a key row a `cp.async.bulk`, completing on the
    buffer's mbarrier). `combine` is where split-KV chunks meet: "launch" (None: a second
    launch, attention_combine) or "cluster" (the chunks are one cluster of at most
    ATTENTION_CLUSTER_SPLITS CTAs; after its tile loop each CTA leaves its normalized rows in its
    shared memory, and each combines a share of the output from every chunk's, over DSMEM).
    `engine` (latent_attention only): "mma" or "wgmma" (`LatentWgmma`: one or two warpgroups, a
    ring of 64-key chunks sized by the shared memory; its tile, stages and warps are its own); None:
    LATENT_ENGINE, or "mma" where the schedule asks for one of the mma engine's knobs. `partials`
    (the wgmma engine, split and combined by a launch): the element its chunks' normalized rows are
    stored in for attention_combine, "float32" (None) or "bfloat16" (ATTENTION_PARTIALS). `block_rows` (the
    wgmma engine): the most query rows a CTA holds (8, 16 or 32, on one warpgroup; None: `latent_wgmma_blocks`),
    the rest in more row blocks that read the same chunks."""

    tile: int | None = None
    stages: int | None = None
    warps: int | None = None
    loads: str | None = None
    combine: str | None = None
    engine: str | None = None
    partials: str | None = None
    block_rows: int | None = None

    def __post_init__(self) -> None:
        if self.block_rows is not None:
            _choice("Attention", "block_rows", self.block_rows, LATENT_BLOCK_ROWS,
                    "8, 16 or 32 query rows a wgmma latent block")
        if self.loads is not None:
            _choice("Attention", "loads", self.loads, ATTENTION_LOADS, "'copy' or 'bulk'")
        if self.partials is not None:
            _choice("Attention", "partials", self.partials, ATTENTION_PARTIALS, "'float32' or 'bfloat16'")
        if self.combine is not None:
            _choice("Attention", "combine", self.combine, ATTENTION_COMBINES, "'launch' or 'cluster'")
        if self.engine is not None:
            _choice("Attention", "engine", self.engine, ATTENTION_ENGINES, "'mma' or 'wgmma'")
        if self.tile is not None:
            _choice("Attention", "tile", self.tile, (32, 64, 128), "32, 64 or 128 keys a shared-memory tile")
        if self.stages is not None:
            _choice("Attention", "stages", self.stages, (2, 3, 4), "2, 3 or 4 shared-memory buffers of a tile")
        if self.warps is not None:
            _choice("Attention", "warps", self.warps, (4, 8), "4 or 8 warps a CTA")

    def mma_knobs(self) -> list[str]:
        """The knobs this schedule sets that pick the mma.sync engine where no engine is named: its tile,
        stages and warps, loads 'bulk', combine 'cluster' (the wgmma engine combines in its cluster too, when
        named with it; a latent attention asking for none takes LATENT_ENGINE)."""
        named = [knob for knob in ("tile", "stages", "warps") if getattr(self, knob) is not None]
        return named + ["loads"] * (self.loads == "bulk") + ["combine"] * (self.combine == "cluster")


def paged_problems(tokens: int, page_size: int, splits: int) -> list[str]:
    """The facts every attention over a paged cache shares: its tokens a request, its page size
    and its split count."""
    found = []
    if not 1 <= tokens <= ATTENTION_MAX_TOKENS:
        found.append(f"supports 1-{ATTENTION_MAX_TOKENS} tokens a request (a decode step, or a speculative "
                     f"verify); got {tokens}")
    if page_size not in ATTENTION_PAGES:
        found.append(f"page size {page_size}: one of {', '.join(map(str, ATTENTION_PAGES))}")
    if splits < 1:
        found.append(f"splits {splits}: at least one chunk of the keys")
    return found


def pitch_problems(pitches) -> list[str]:
    """`row_pitch`'s problems of each (what, pitch, row width) whose pitch is given."""
    return [problem for what, pitch, width in pitches if pitch is not None
            for problem in filter(None, [row_pitch(what, pitch, width)])]


@dataclass(frozen=True)
class AttentionSpec(Spec):
    """A launch of attention: `batch` requests of `tokens` rows, `heads` query heads sharing
    `kv_heads` KV heads of `head` values (value size = key size), a cache of `cache_pages` pages of
    `page_size` positions, a page table of `max_pages` columns, `splits` chunks of the keys, and
    the q / k / v row pitches (parts of wider rows, read in place). Facts the kernel relies on
    and the runtime guarantees: a request's rows hold consecutive positions p0..p0+tokens-1."""

    kernel: ClassVar[str] = "attention"
    batch: int
    tokens: int
    heads: int
    kv_heads: int
    head: int
    page_size: int
    max_pages: int | None = None
    cache_pages: int | None = None
    splits: int = 1
    q_pitch: int | None = None
    k_pitch: int | None = None
    v_pitch: int | None = None

    def problems(self) -> list[str]:
        found = []
        if self.batch < 1:
            found.append(f"needs at least one request; got batch {self.batch}")
        found += paged_problems(self.tokens, self.page_size, self.splits)
        if self.kv_heads < 1 or self.heads < 1 or self.heads % self.kv_heads:
            found.append(f"{self.heads} query heads do not share {self.kv_heads} KV heads evenly")
        elif self.heads // self.kv_heads > ATTENTION_MAX_GROUP:
            found.append(f"{self.heads // self.kv_heads} query heads a KV head: at most {ATTENTION_MAX_GROUP} "
                         "(a CTA's query rows share every key it reads)")
        if self.head not in ATTENTION_HEADS:
            found.append(f"head size {self.head}: one of {', '.join(map(str, ATTENTION_HEADS))} (whole 16-byte "
                         "vectors, a PV accumulator that fits a thread's registers)")
        if self.max_pages is not None and self.max_pages < 1:
            found.append(f"page table needs at least one column; got {self.max_pages}")
        if self.cache_pages is not None and self.cache_pages < 1:
            found.append(f"cache needs at least one page; got {self.cache_pages}")
        return found + pitch_problems((("q pitch", self.q_pitch, self.heads * self.head),
                                       ("k pitch", self.k_pitch, self.kv_heads * self.head),
                                       ("v pitch", self.v_pitch, self.kv_heads * self.head)))


LATENT_WIDTHS = (256, 512)  # latent (lora) widths: whole pairs of 8-column tiles for 4 or 8 warps
LATENT_ROPES = (0, 32, 64)  # rotated key widths: the row stays whole 32-value MMA steps


@dataclass(frozen=True)
class LatentAttentionSpec(Spec):
    """A launch of latent_attention (absorbed MLA): `batch` requests of `tokens` rows, `heads`
    query heads over one cache row `lora + rope` wide (the latent, then the shared rotated key),
    a cache of `cache_pages` pages of `page_size` positions, a page table of `max_pages`
    columns, `splits` chunks of the keys; `nope`: each head's unrotated values before its
    rotated part in the query projection (pitch `qr_pitch`); the latent's and k_rope's pitches."""

    kernel: ClassVar[str] = "latent_attention"
    batch: int
    tokens: int
    heads: int
    lora: int
    rope: int
    page_size: int
    max_pages: int | None = None
    cache_pages: int | None = None
    splits: int = 1
    nope: int | None = None
    qr_pitch: int | None = None
    latent_pitch: int | None = None
    k_rope_pitch: int | None = None

    def problems(self) -> list[str]:
        found = []
        if self.batch < 1 or self.heads < 1:
            found.append(f"needs at least one request and one head; got batch {self.batch}, heads {self.heads}")
        found += paged_problems(self.tokens, self.page_size, self.splits)
        if self.lora not in LATENT_WIDTHS:
            found.append(f"latent width {self.lora}: one of {', '.join(map(str, LATENT_WIDTHS))}")
        if self.rope not in LATENT_ROPES:
            found.append(f"rotated key width {self.rope}: one of {', '.join(map(str, LATENT_ROPES))}")
        if self.rope and (self.nope is None or self.nope < 0 or self.nope % VECTOR):
            found.append(f"the query's unrotated part ({self.nope}) must be whole 8-value vectors: its rotated "
                         "part is read in place")
        unit = (self.nope or 0) + self.rope
        return found + pitch_problems((("qr pitch", self.qr_pitch, self.heads * unit),
                                       ("latent pitch", self.latent_pitch, self.lora),
                                       ("k_rope pitch", self.k_rope_pitch, self.rope)))


EXPANDED_POSITIONS = 16  # cached positions a latent_expand CTA expands (its latent rows in shared memory)
EXPANDED_MAX_UNIT = 256  # a head's key (nope + rope) and value widths: one tile row of the attention


@dataclass(frozen=True)
class ExpandedLatentSpec(Spec):
    """The expanded path of a latent attention (MLA): `latent_expand` writes the step's latent rows
    into the cache and expands every cached latent of a request into per-head keys [W_k,h c, k_rope]
    (padded with zeros to whole 32-value MMA steps) and values W_v,h c in scratch caches paged as the
    latent cache; `expanded_attention` attends over them, a CTA a head. Shapes as
    `LatentAttentionSpec`, plus each head's `v` value width."""

    kernel: ClassVar[str] = "expanded_attention"
    batch: int
    tokens: int
    heads: int
    nope: int
    rope: int
    v: int
    page_size: int
    max_pages: int | None = None
    cache_pages: int | None = None
    splits: int = 1
    lora: int | None = None  # latent_expand's (the attention reads no latent)
    qr_pitch: int | None = None
    latent_pitch: int | None = None
    k_rope_pitch: int | None = None

    @property
    def key_width(self) -> int:
        """A head's expanded key: nope + rope values, zeros to whole 32-value MMA steps."""
        return -(-(self.nope + self.rope) // 32) * 32

    def problems(self) -> list[str]:
        found = []
        if self.batch < 1 or self.heads < 1:
            found.append(f"needs at least one request and one head; got batch {self.batch}, heads {self.heads}")
        found += paged_problems(self.tokens, self.page_size, self.splits)
        unit = self.nope + self.rope
        if self.nope < 1 or self.rope < 0 or unit % VECTOR or self.key_width > EXPANDED_MAX_UNIT:
            found.append(f"each head's query unit nope {self.nope} + rope {self.rope}: whole 8-value vectors, "
                         f"at most {EXPANDED_MAX_UNIT} (read by 16-byte copies, one tile row a key)")
        if self.v not in ATTENTION_HEADS:
            found.append(f"value width {self.v}: one of {', '.join(map(str, ATTENTION_HEADS))} (whole pairs of "
                         "8-column tiles for 4 warps; the combine's head sizes)")
        if self.lora is not None and (self.lora < VECTOR or self.lora % VECTOR) or self.rope % VECTOR:
            found.append(f"latent {self.lora} and rotated key {self.rope} widths: whole 8-value vectors")
        return found + pitch_problems((("qr pitch", self.qr_pitch, self.heads * unit),
                                       ("latent pitch", self.latent_pitch, self.lora),
                                       ("k_rope pitch", self.k_rope_pitch, self.rope)))


@dataclass(frozen=True)
class AttentionCombineSpec(Spec):
    """A launch of attention_combine: `splits` partial results of `rows` x `heads` heads of `head`
    values, merged by their log-sum-exps."""

    kernel: ClassVar[str] = "attention_combine"
    rows: int
    heads: int
    head: int
    splits: int
    partials: str = "float32"

    def problems(self) -> list[str]:
        found = []
        if self.partials not in ATTENTION_PARTIALS:
            found.append(f"partials {self.partials!r}: one of {', '.join(ATTENTION_PARTIALS)}")
        if self.rows < 1 or self.heads < 1:
            found.append(f"needs at least one row and one head; got rows {self.rows}, heads {self.heads}")
        if self.head not in ATTENTION_HEADS + LATENT_WIDTHS:
            found.append(f"head size {self.head}: one of {', '.join(map(str, ATTENTION_HEADS + LATENT_WIDTHS))}")
        if self.splits < 2:
            found.append(f"splits {self.splits}: a combine merges at least 2 chunks (one chunk writes out itself)")
        return found


# ----------------------------------------------------------------------------------------------
# mixture: the router, the kept experts' gated pairs, their down products and the sum

MIXTURE_SCORINGS = ("sigmoid", "softmax")
MIXTURE_MAX_EXPERTS = 512  # the choosing warp holds 16 experts a lane (Qwen3-Next's 512); 32 warps dot 16 rows each
MIXTURE_MAX_WARPS = 32  # one warp a kept expert (routed, and the folded shared one), one block of <= 1024 threads
MIXTURE_MAX_GROUPS = WARP  # grouped top-k: one lane of the choosing warp ranks a group
INT32_ELEMENTS = 2**31  # offsets inside one expert's rows are 32-bit


def kept_block_problem(top_k: int, shared: bool) -> str | None:
    """Why `top_k` routed experts (and the shared one, where `shared`) are not one block of kept
    experts, a warp each (None: they are)."""
    warps = top_k + int(shared)
    if warps <= MIXTURE_MAX_WARPS:
        return None
    which = f"{top_k} routed + 1 shared" if shared else f"{top_k} routed"
    return f"a block of {warps} kept experts ({which}, a warp each) is above {MIXTURE_MAX_WARPS} warps"


def mixture_problems(top_k: int, shared: bool, scatters: bool) -> list[str]:
    """Why a mixture with its shared expert folded in (where `shared`) has no launch, as the
    hold-mixture-shared rule asks: the folded block's warps, and no fused scatter."""
    found = list(filter(None, [kept_block_problem(top_k, shared)])) if shared else []
    if scatters:
        found.append("the mixture scatters its result to rows a parameter names (no fused scatter)")
    return found


# The router's rows a cluster (`mixture_router`'s `rows_a_cta`): each warp reads its router rows
# once for every row of the block, so the router's reads from L2 shrink by the block (at Kimi
# Linear's batch 256 one row a cluster reads the 1.2 MB router 256 times). Measured on the H200
# (bench/mixture.py with LANEC_ROUTER_ROWS=2,4,8, 2026-11-30, Kimi Linear's router of 256 experts
# alone; 1 / 2 / 4 / 8 rows a cluster): 4 rows 6.0 / 9.8 / 11.9 / 14.2 us, 8 rows 6.1 / 9.7 / 11.9 /
# 23.2, 16 rows 9.8 / 9.7 / 11.9 / 24.3, 64 rows 22.9 / 24.7 / 21.7 / 27.1, 256 rows 77.6 / 78.6 /
# 49.9 / 82.3. Below 64 rows a cluster a row keeps the most CTAs in flight; from 64 rows on, blocks
# of 4 win (1.06x at 64, 1.56x at 256); 8 rows a cluster never pays (its block's registers).
ROUTER_ROWS_A_CTA = (1, 2, 4, 8)
# Again in the real-size steps (2026-12-03, bench/model.py --side lanec, two rounds): at 24 rows 2 and 4 rows a
# cluster gain 17-25 us a step (0.2%), 8 rows lose 97; at 8 rows 2 rows lose 35, 4 rows 100. Not changed.
ROUTER_BLOCK_FROM = 64  # rows from which the router scores ROUTER_BLOCK_ROWS rows a cluster
ROUTER_BLOCK_ROWS = 4
# fold-norm-into-router: the normed rows a router CTA keeps in its shared memory (bf16) at most
ROUTER_NORM_TILE_BYTES = 64 * 1024
# From this many rows a mixture's router logits are one gemm_tc launch (fp32 out: x against the router
# rows on tensor cores, the 1.2 MB router read once), and mixture_router only chooses from them
# (`logits`: a warp a row, ROUTER_LOGIT_ROWS rows a CTA, no cluster). The fused router measured 21.7
# us a launch at 64 rows and 49.9 at 256 on the H200 (bench/mixture.py, 2026-11-30), each cluster
# re-reading the router for its 4 rows. The two launches against it, the whole real-size step
# (bench/model.py, Kimi-Linear-48B-A3B, context 1k, H200, 2026-11-30): batch 64 15256.0 -> 14883.2 us,
# batch 256 31764.6 -> 30816.3 us (the 26 MoE layers' routers; 1.20x -> 1.23x and 1.05x -> 1.09x the
# chain). Below 64 rows not measured: the fused router stays.
ROUTER_GEMM_ROWS: int | None = 64
ROUTER_LOGIT_ROWS = 8


ROUTER_SPLITS = (1, 2, 4, 8, 16)  # CTAs a cluster the router rows may be split over (16: a non-portable cluster)


# The router rows a CTA keeps at least when its cluster is split further (a row a warp). Measured on the H200
# (bench/router_chain.py, 2026-12-02: Kimi Linear's 256 experts over 2304-wide rows, the norm folded in, a PDL
# chain): 2 CTAs of 128 rows 12.46 us, 4 of 64 10.07, 8 of 32 6.05, 16 of 16 (a non-portable cluster) 5.06. Each
# CTA streams its rows at about 40 GB/s after the PDL wait, so more CTAs of fewer rows read them sooner.
ROUTER_CTA_ROWS = 16

# Up to this many rows (the per-row mixture path, the fused router of a row a cluster), the router's launch also
# runs the shared expert's gated pair in clusters of its own beside the router's, ROUTER_SHARED_UNITS hidden units a
# warp, and mixture_gated runs the routed experts only (the router's 16 CTAs leave the other SMs idle while they
# norm, dot, gather and choose). Measured on the H200 (2026-12-02, bench/model.py, real-size Kimi Linear batch 1,
# two rounds): 1930.4 / 1931.0 us without it, 2027.8 / 2019.9 with it at 1 unit a warp, 2009.7 / 2011.2 at 2; the
# router alone in bench/router_chain.py 4.80 -> 5.42 us. Slower: None (off); the kernels and their cases stay.
ROUTER_SHARED_ROWS: int | None = None
ROUTER_SHARED_UNITS = 1
# Up to ROUTER_PREFETCH_ROWS rows (the per-row path's fused router over a cluster), once a row's experts are chosen
# every CTA of the router's cluster (each receives every score and chooses as the first does) brings its share of
# the chosen experts' first gate and up rows into L2 by a bulk prefetch, ROUTER_PREFETCH_BYTES a CTA at most: memory
# is busy with mixture_gated's first reads while the router's launch ends and mixture_gated passes its PDL wait
# and reads the ids. A CTA's end waits for its bulk prefetches, and one SM's run at about 0.7 TB/s, so the share is
# small. Measured on the H200 (2026-12-02, bench/model.py, real-size Kimi Linear batch 1, two rounds each, one
# command; the first 64, 128 or 256 rows of each chosen expert's two matrices, a (row, expert, matrix) triple a
# CTA): without 1831.6 / 1832.2 us; 64 rows 1830.4 / 1830.5; 128 rows (576 KB a CTA) 1828.4 / 1826.6; 256 rows
# 1829.9 / 1836.8; the first CTA's lanes prefetching all 16 triples at 128 rows 2174.8 / 2172.7 (its 9.4 MB at
# 0.7 TB/s hold the launch's end 13 us). Then, on another H200, three rounds each: without 1820.0 / 1819.8 / 1819.0,
# with 128 rows 1820.6 / 1820.1 / 1818.9: no gain (each CTA's end waits 0.8 us for its share, as long as the memory
# it keeps busy saves). Off (None); the kernel's option (`prefetch_units`, `prefetch_spread`) and its cases stay.
ROUTER_PREFETCH_ROWS: int | None = None
ROUTER_PREFETCH_BYTES = 128 * 2304 * 2


def router_split(experts: int) -> int:
    """CTAs a row's router rows are split over: up to 16 (a cluster; past 8 not portable), each at least
    ROUTER_CTA_ROWS rows (a row a warp), dividing the experts."""
    split = 1
    while split < max(ROUTER_SPLITS) and experts % (2 * split) == 0 and experts // (2 * split) >= ROUTER_CTA_ROWS:
        split *= 2
    return split


def router_warps(experts: int, split: int) -> tuple[int, int, int]:
    """The fused router's (router rows a CTA, a warp, warps a CTA) at `split` CTAs a cluster."""
    per_cta = experts // split if split in ROUTER_SPLITS and experts >= split else 1
    per_warp = -(-per_cta // WARP)
    return per_cta, per_warp, -(-per_cta // per_warp)


def router_gemm_spec(rows: int, width: int, experts: int, x_pitch: int | None = None) -> dict | None:
    """The gemm_tc spec of a router's logits where they are one launch of their own (from
    ROUTER_GEMM_ROWS rows, where gemm_tc's facts take the shape), else None (the fused router)."""
    gemm = {"rows": rows, "width": width, "parts": (experts,), "out_dtype": "float32",
            **({"x_pitch": x_pitch} if x_pitch is not None else {})}
    if ROUTER_GEMM_ROWS is None or rows < ROUTER_GEMM_ROWS or GemmSpec(**gemm).problems():
        return None
    return gemm


def router_rows_a_cta(rows: int, warps: int = 4) -> int:
    """The router's rows a cluster for a step of `rows` rows (see ROUTER_ROWS_A_CTA), at most the
    CTA's `warps` (a warp chooses a row)."""
    wanted = ROUTER_BLOCK_ROWS if rows >= ROUTER_BLOCK_FROM else 1
    return max(r for r in ROUTER_ROWS_A_CTA if r <= min(wanted, warps))


def router_block_reason(rows: int, rows_a_cta: int) -> str:
    """Why the router scores `rows_a_cta` rows a cluster at `rows` rows (`lanec explain`)."""
    if rows < ROUTER_BLOCK_FROM:
        return (f"{rows} rows are below {ROUTER_BLOCK_FROM}: a cluster a row keeps the most CTAs in flight "
                "(bench/mixture.py, LANEC_ROUTER_ROWS)")
    return (f"{rows} rows are at least {ROUTER_BLOCK_FROM}: each warp's router rows read once for {rows_a_cta} "
            "rows (bench/mixture.py, LANEC_ROUTER_ROWS)")


@dataclass(frozen=True)
class MixtureRouterSpec(Spec):
    """A launch of mixture_router: `rows` of `width` values scored against `experts` router rows
    (`scoring`), the best `top_k` chosen, over the best `topk_groups` of `groups` where grouped;
    x rows `x_pitch` apart; the router rows split over a cluster of `split` CTAs."""

    kernel: ClassVar[str] = "mixture_router"
    rows: int
    width: int
    experts: int
    top_k: int
    scoring: str = "sigmoid"
    groups: int | None = None
    topk_groups: int | None = None
    x_pitch: int | None = None
    split: int = 1
    rows_a_cta: int = 1
    logits: bool = False  # the logits are given ([rows, experts] fp32): it only chooses
    norm: bool = False  # fold-norm-into-router: each CTA norms its block's rows itself
    shared_hidden: int = 0  # the shared expert's gated pair in more clusters of the launch (ROUTER_SHARED_ROWS)

    def problems(self) -> list[str]:
        found = [] if self.rows >= 1 else [f"needs at least one row; got {self.rows}"]
        if self.shared_hidden and (self.logits or self.rows_a_cta != 1):
            found.append(f"shared_hidden {self.shared_hidden}: the shared expert's clusters read a row each beside "
                         "a fused router of one row a cluster (not from given logits, not rows_a_cta "
                         f"{self.rows_a_cta})")
        if self.norm:
            found += self.norm_problems()
        if self.logits and self.split != 1:
            found.append(f"split {self.split}: from given logits a CTA chooses its rows alone (split 1)")
        found += filter(None, [vector_width("width", self.width)])
        if self.rows_a_cta not in ROUTER_ROWS_A_CTA:
            found.append(f"rows_a_cta {self.rows_a_cta}: {', '.join(map(str, ROUTER_ROWS_A_CTA))} rows a cluster "
                         "(each warp's router rows read once for all of them)")
        if self.split not in ROUTER_SPLITS or self.experts % self.split:
            found.append(f"split {self.split}: 1, 2, 4, 8 or 16 CTAs (a cluster; 16 is not portable) sharing the "
                         f"{self.experts} router rows evenly")
        if not 1 <= self.experts <= MIXTURE_MAX_EXPERTS:
            found.append(f"experts {self.experts}: 1-{MIXTURE_MAX_EXPERTS} (the choosing warp holds "
                         f"{MIXTURE_MAX_EXPERTS // WARP} a lane)")
        if not 1 <= self.top_k <= min(self.experts, MIXTURE_MAX_WARPS):
            found.append(f"top_k {self.top_k}: 1 to the experts, at most {MIXTURE_MAX_WARPS} (the kept experts' "
                         "block, a warp each)")
        if self.scoring not in MIXTURE_SCORINGS:
            found.append(f"scoring {self.scoring!r}: sigmoid or softmax")
        if (self.groups is None) != (self.topk_groups is None):
            found.append("grouped top-k needs both groups and topk_groups")
        elif self.groups is not None and self.topk_groups is not None:
            groups, kept = self.groups, self.topk_groups
            if not 1 <= groups <= MIXTURE_MAX_GROUPS or self.experts % groups or self.experts // groups < 2:
                found.append(f"groups {groups}: 1-{MIXTURE_MAX_GROUPS} (a lane ranks a group) of at least 2 of the "
                             f"{self.experts} experts each")
            elif not 1 <= kept <= groups or self.top_k > kept * (self.experts // groups):
                found.append(f"topk_groups {kept}: 1-{groups} groups, holding the top_k {self.top_k} experts")
        if self.x_pitch is not None:
            found += filter(None, [row_pitch("x pitch", self.x_pitch, self.width)])
        return found

    def norm_problems(self) -> list[str]:
        """Why a norm of the rows cannot run in this router's prologue (none: it can)."""
        if self.logits:
            return ["norm prologue: the logits are a gemm_tc launch's (ROUTER_GEMM_ROWS), the router only chooses"]
        held = norm_held_vectors(self.rows_a_cta, self.width, router_warps(self.experts, self.split)[2])
        if held > NORM_HELD_VECTORS:
            return [f"norm prologue: {self.rows_a_cta} rows of {self.width} hold {held} vectors a thread, above the "
                    f"{NORM_HELD_VECTORS} its registers take"]
        if 2 * self.rows_a_cta * self.width > ROUTER_NORM_TILE_BYTES:
            return [f"norm prologue: {self.rows_a_cta} normed rows of {self.width} pass the "
                    f"{ROUTER_NORM_TILE_BYTES // 1024} KiB of shared memory it keeps them in"]
        return []


@dataclass(frozen=True)
class MixtureExpertsSpec(Spec):
    """A launch of mixture_gated (`kernel`: each kept expert's gate and up rows, SwiGLU) or
    mixture_down (each kept expert's down rows, weighted and summed): `rows` of `width` values,
    `experts` of `hidden` units, `top_k` kept a row, a folded shared expert of `shared_hidden`
    units (0: none); x rows `x_pitch` apart."""

    kernel: str
    rows: int
    width: int
    hidden: int
    experts: int
    top_k: int
    shared_hidden: int = 0
    x_pitch: int | None = None

    def problems(self) -> list[str]:
        found = [] if self.rows >= 1 else [f"needs at least one row; got {self.rows}"]
        if not 1 <= self.top_k <= self.experts:
            found.append(f"top_k {self.top_k}: 1 to the {self.experts} experts")
        found += filter(None, [kept_block_problem(self.top_k, self.shared_hidden > 0),
                               vector_width("width", self.width), vector_width("expert width", self.hidden)])
        if self.shared_hidden:
            found += filter(None, [vector_width("shared expert width", self.shared_hidden)])
        if max(self.hidden, self.shared_hidden) * self.width >= INT32_ELEMENTS:
            found.append(f"an expert of {max(self.hidden, self.shared_hidden)} x {self.width} values: offsets inside "
                         f"an expert are 32-bit, so below {INT32_ELEMENTS} values")
        if self.x_pitch is not None:
            found += filter(None, [row_pitch("x pitch", self.x_pitch, self.width)])
        return found


MIXTURE_MAX_VECTORS = 48  # a mixture lane's vectors in flight: 192 registers of the 255 a thread may hold


@dataclass(frozen=True)
class MixtureSchedule(Schedule):
    """mixture_gated's and mixture_down's knobs (the per-row path): the `units` a warp dots of its kept
    expert (down: the outputs a CTA; gated: hidden units, a gate and an up row each); None: the kernel's
    UNITS_DOWN (4) or UNITS_GATED (2). More units a warp make fewer, longer CTAs of the same block.
    `vectors`: the 16-byte vectors a lane issues before it multiplies any (a chunk of its dots; None: the
    kernel's VECTORS_IN_FLIGHT, 16). Fewer take fewer registers (more CTAs an SM, fewer waves) and more
    chunks, each a round trip. What a shape takes is measured in the whole step (schedules.json's
    "mixture_gated" and "mixture_down" entries: bench/RESULTS.md, 2026-12-02 and 2026-12-03), not alone: the
    launch's grid decides when its PDL successors start."""

    units: int | None = None
    vectors: int | None = None

    def __post_init__(self) -> None:
        if self.units is not None and not (type(self.units) is int and 1 <= self.units <= WARP):
            raise ValueError(f"MixtureSchedule units is 1-{WARP} (every lane of a warp ends holding each of its "
                             f"sums); got {self.units!r}")
        if self.vectors is not None and not (type(self.vectors) is int and 1 <= self.vectors <= MIXTURE_MAX_VECTORS):
            raise ValueError(f"MixtureSchedule vectors is 1-{MIXTURE_MAX_VECTORS} (16-byte vectors a lane has in "
                             f"flight, 4 registers each); got {self.vectors!r}")


# The grouped path (mixture_grouped.py): rows grouped by expert on the device, tensor cores for an
# expert's rows; mixtures of more rows than this take it. Measured on the H200 (bench/mixture.py,
# 2026-11-29, 256 experts top 8 with the shared expert): the per-row kernels are faster at 16 rows
# (Kimi Linear 457 against 553 us, DeepSeek-V3 2785 against 3083), the grouped path at 64 (1177
# against 1784, 6477 against 11074) and 256 (1546 against 7129, 8281 against 44268); the ratio,
# interpolated in log rows, crosses 1 at 20 to 25 rows. In the whole real-size Kimi Linear step
# (bench/model.py, 2026-11-30) 3 speculative tokens at batch 8, 24 rows a mixture, ran 15.0 ms a step
# grouped against 20.4 ms per-row: inside the step, where the 26 mixtures' weights meet a cold L2, the
# grouped path already wins at 24 rows, so the line sat at the 16 rows measured per-row-faster.
# With blocks of 16 rows (`mixture_group_rows`, below) the line moved down again (bench/mixture.py,
# 2026-11-30, Kimi Linear with its shared expert, per-row against grouped): 4 rows 129.4 against
# 135.4 us, 8 rows 244.5 against 222.4, 16 rows 474.5 against 370.7; the whole real-size step at
# batch 8 (bench/model.py, same day) ran 6616 us grouped against 8108 per-row (1.27x against 1.04x
# the chain). Mixtures of more than 4 rows take the grouped path.
# `lanec compile --grouped-experts` takes the grouped path at every row count.
MIXTURE_GROUPED_ROWS: int | None = 4
# The per-row path's early down rows (`early`, mixture.py's KeptExperts): at most this many rows (None:
# never), mixture_down brings its share of the chosen experts' down rows into L2 before its PDL wait, while
# mixture_gated streams the gate and up rows (evict-first, so as not to push them out). The real-size
# batch-1 step spends about 6 us a mixture over the bytes of gated + down (bench/mixture.py: 42.3 against
# 31.7 us with the router); the aim is down's ramp hidden behind gated's stream. Measured slower, so off:
# its 42 GPU cases pass and compute-sanitizer is clean, the real-size batch-1 step with it agrees with the
# interpreter (49 of 49), but that step ran 2169.3 us with it against 2085.6 without (bench/model.py
# kimi-full-b1-c1k, one command, H200, 2026-11-30): gated's stream slows by more than down's ramp saves.
MIXTURE_DOWN_EARLY_ROWS: int | None = None
# The per-row path's down rows into registers before the PDL wait (`early_weights`, mixture.py's MixtureDown): at
# most this many rows (None: never), each mixture_down warp reads its expert's id and issues its first chunk of
# down rows before the wait, so the CTAs resident under mixture_gated's tail stream then; mixture_gated releases it
# only after its own wait (the ids are the router's). Unlike the L2 prefetch above nothing is prefetched ahead of
# what a warp multiplies, and gated's rows keep the default policy. The real-size batch-1 graph profile put
# mixture_down at 12.2-12.7 us for 10.2 us of bytes (84% of the copy bandwidth, 1.9 us a launch over them, 26
# launches; bench/RESULTS.md, thirty-third session). Measured on the real-size batch-1 step (bench/model.py --side
# lanec, three paired rounds on one H200): 1795.5 / 1791.9 / 1789.0 us without, 1785.6 / 1785.7 / 1781.2 with
# (-7.9 us, every round faster); its --check 49 of 49. Two to four rows (the per-row path's other shapes) are not
# measured, so the fact stops at one.
MIXTURE_DOWN_EARLY_WEIGHTS_ROWS: int | None = 1
# The per-row path's shared expert before the PDL wait (`early_shared`, mixture.py's MixtureGated): at most this
# many rows (None: never), where the fused router norms the mixture's input, mixture_gated's shared warp norms the
# router's own input rows itself (they were complete when the router's CTAs passed their wait, and the router then
# releases mixture_gated only after it) and dots its MIXTURE_EARLY_SHARED_UNITS units a warp while the router
# chooses, so the shared expert's rows (9.4 MB at Kimi Linear's shape) leave the stream after the wait. Only the
# first MIXTURE_EARLY_SHARED_CTAS CTAs of a row (None: every one) do: the later ones start once the first wave's
# leave, after the router has ended, so they prefetch their shared rows and dot the router's normed row after the
# wait as the routed warps do, without the norm's latency on the launch's tail. 248 is the first wave beside the
# router at batch 1 on 132 SMs: 2 CTAs an SM, 1 on each of the router's 16. More units a warp put more of the
# shared expert there: 3 is 342 CTAs (92 registers, as without it); 4 would be 118 registers, one CTA an SM.
# Measured on the H200 (bench/model.py, real-size Kimi Linear batch 1, rounds in one command each; bench/RESULTS.md,
# twenty-fifth session), us: without 1891.5 / 1902.8, every CTA at 2 units 1872.0 / 1871.3, the first 248 at 3
# units 1866.1 / 1869.7; a third command: without 1899.6 / 1900.0 / 1903.2, the first 248 at 3 units 1879.8 /
# 1881.3 / 1881.7.
MIXTURE_EARLY_SHARED_ROWS: int | None = 1
MIXTURE_EARLY_SHARED_UNITS = 3
MIXTURE_EARLY_SHARED_CTAS: int | None = 248
# The per-row path's mixture_gated waits on a flag a row that the fused router raises once the row's ids are
# stored (`ready`, a release at GPU scope; the router's first CTA lowers it before its dependents launch), not on
# the PDL wait for the router's grid to end: the routed rows' reads start without the grid's end and its memory
# flush. Every read of the router's CTAs precedes the flag (the choosing warp has every CTA's scores), so
# mixture_gated's writes follow them; mixture_down still waits for mixture_gated's end. Measured on the H200
# (2026-12-03, `session.sh ready`, bench/model.py, real-size Kimi Linear batch 1, four paired rounds in one command):
# 1799.2-1806.9 us with the PDL wait, 1820.1-1831.4 with the flag, 0.8 us a mixture slower: the router's fence
# before its release delays mixture_gated's launch (and the early shared warp under the router), and the spinning
# thread's fence and barrier follow the flag. Its GPU cases pass, compute-sanitizer is clean and the plan with it
# agrees with the interpreter (49 of 49). False: the PDL wait; the option and its cases stay.
MIXTURE_READY_FLAG = False
# The grouped path's segments written by the router (`MixtureRouter(segments=True)`: the cluster
# drawing the last ticket runs mixture_groups' work) rather than by a launch of their own: one launch a
# mixture fewer (mixture_groups is 4.7 us a launch in the batch-8 profile, eager). Its 11 GPU cases
# pass on the H200 (compute-sanitizer clean), but it buys nothing in the graph: the real-size batch-8
# step ran 6579.6 us with it against 6565.5 without (bench/model.py, 2026-11-30, one command; PDL
# already hides the small launch). Off.
ROUTER_SEGMENTS = False
# The grouped path's last launch, mixture_sum (a row's fp32 slots summed into the bf16 result), folded
# into the rmsnorm after it where that norm's x is the result's only reader: the norm sums the slots where
# it reads x (RmsNorm `slots`), one launch a mixture fewer at batch 5 and up. Measured on the H200
# (2026-11-30, `session.sh sum-norm`, bench/model.py --side lanec, two rounds): the real-size batch-64 step,
# 26 launches fewer, 15160.1 / 15161.6 us against 15161.9 / 15181.0 without: no loss, at most 19 us gained.
MIXTURE_SUM_IN_NORM = True
MIXTURE_GROUP_MAX_PAIRS = 16384  # (row, chosen expert) pairs mixture_groups' one CTA walks: 16 steps a warp
# A grouped product's block (`group_rows`: an expert's rows a pass over its weight tile, padded to it
# inside the kernel): the padding rows cost their MMAs and their shared-memory copies, and a segment
# longer than a block reads the tile again. The smallest block that holds twice a segment's mean
# length (rows x top_k / experts), so that most segments take one pass: 16 rows for Kimi Linear at
# batch 64 (a mean of 2) and 256 (8). Measured on the H200 (bench/mixture.py, 2026-11-30, the routed
# experts alone, 256 experts top 8): blocks of 16 rows against 64 take Kimi Linear's batch 64 from
# 1157 to 807 us and batch 256 from 1365 to 962, DeepSeek-V3's batch 64 from 6377 to 4701; blocks
# of 32 land between (1100 and 5285 us at those). Blocks below 64 rows keep 4 stages, so two CTAs
# share an SM (16:4 against 16:6: 910 against 962 us at Kimi's batch 256, 4655 against 4701 at
# DeepSeek's batch 64); the 64-row block keeps what STAGE_BUDGET holds (6).
MIXTURE_GROUP_BLOCKS = (16, 32, 64)
# The grouped products' K values a stage in blocks below 64 rows (`stage_k`: a weight row's 256 bytes a copy, where
# 64 K values copy 128), and their stages there by stage_k (two CTAs an SM either way). Measured on the H200
# (2026-12-03, tests/gpu/session.sh grouped, bench/model.py --side lanec, the real-size Kimi Linear steps at 1k keys,
# two rounds): 128 K values at 2 stages against 64 at 4 take 3 speculative tokens at batch 8 (24 rows) from
# 10247 / 10246 to 10129 / 10127 us and batch 64 from 14786 / 14785 to 14611 / 14632; 128 at 3 stages (one CTA an
# SM) 10602 / 10598. The 64-row block keeps 64 K values at the stages STAGE_BUDGET holds (not measured at 128).
# With the compact grid below (one command on another H200): batch 8 6233 -> 6200 us, batch 64 14792 -> 14572, but
# batch 256 30538 -> 30827 (+0.9%: a segment of 8 rows a mean there, and one stage in flight behind the one
# multiplied where 64 K values keep three), so only below MIXTURE_GROUP_WIDE_BELOW rows (128 rows not measured).
MIXTURE_GROUP_STAGE_K = 128
MIXTURE_GROUP_STAGES = {64: 4, 128: 2}
MIXTURE_GROUP_WIDE_BELOW = 256
# The grouped products' stage rows swizzled (`swizzle`: vector v of a row's 128 bytes at v ^ (row % 8), no padding)
# rather than padded by 16 bytes: the 6% of shared memory the padding takes is what a third stage of 128 K values
# (or a sixth of 64) needs beside a second CTA on the SM, MIXTURE_GROUP_STAGES_SWIZZLED. Measured on the H200
# (2026-12-03, thirty-second session, tests/gpu/session.sh swizzle, bench/model.py --side lanec, the real-size Kimi
# Linear steps at 1k keys, one round): 3 speculative tokens at batch 8 10117 -> 9597 us (128 K values, 3 stages),
# batch 64 14571 -> 13719, batch 256 30515 -> 28933 (64 K values, 6 stages; 28893 with 128 K values there too, as
# even, so MIXTURE_GROUP_WIDE_BELOW stays).
MIXTURE_GROUP_SWIZZLE = True
MIXTURE_GROUP_STAGES_SWIZZLED = {64: 6, 128: 3}
# Outputs a grouped down CTA (`tile_n`, 64 or 128): 64 makes twice the CTAs of half the weight tile each, so the
# last wave of a launch is finer (at 24 rows about 1700 CTAs of 128 outputs in 6.4 waves of two an SM). Measured even
# (the same run as above: 24 rows 10117 -> 10121 us, swizzled 9597 -> 9606; batch 64 14571 -> 14566; batch 256 30515
# -> 30513), so 128.
MIXTURE_DOWN_TILE = 128
# From this many rows (and below MIXTURE_GROUP_WIDE_BELOW) the grouped products' grid is compact (`compact`: the
# chosen experts' CTAs first, those of experts no row chose after them, where grid order interleaves them). Measured
# as above, with 128 K values a stage: batch 64 14611 / 14632 -> 14591 / 14565 us; 24 rows 10129 / 10127 -> 10149 /
# 10157 (each CTA's scan of the segments costs more than the order saves there), so from 64 rows.
MIXTURE_GROUP_COMPACT_ROWS = 64
# From this many rows each block of a segment has a CTA of its own (`spread`), where one CTA multiplies a segment's
# blocks one after another: a second pass over a weight tile (590 KB for the gated pair) comes after the GPU has
# streamed about 150 MB, so it reads DRAM again, while sibling CTAs running side by side read the tile once from DRAM
# and share it in L2. The grid's routed rows grow to min(experts, pairs) + pairs // group_rows (every split's bound);
# the blocks are ranked as the compact grid ranks the chosen experts (so `spread` implies `compact`). In the
# benchmark's real-size batch-256 step 2048 pairs a layer fall on about 152 experts (13.5 rows each, blocks of 16).
# Measured on the H200 (2026-12-03, thirty-second session, tests/gpu/session.sh spread, bench/model.py --side lanec,
# the real-size Kimi Linear steps at 1k keys, one round): batch 256 28967 -> 24678 us (-14.8%; against the chain in
# the next command 24640 us, 1.34x); batch 64 13720 -> 13739 (even: 512 pairs, few segments past one block), so from
# 256 rows.
MIXTURE_GROUP_SPREAD_ROWS = 256


def mixture_group_rows(rows: int, top_k: int, experts: int) -> int:
    """The grouped products' block for `rows` rows choosing `top_k` of `experts` (see above)."""
    mean = rows * top_k / experts
    return next((block for block in MIXTURE_GROUP_BLOCKS if block >= 2 * mean), MIXTURE_GROUP_BLOCKS[-1])


def mixture_group_stage_k(group_rows: int, rows: int) -> int:
    """The grouped products' K values a stage at `group_rows` a block and `rows` rows (see
    MIXTURE_GROUP_STAGE_K)."""
    return MIXTURE_GROUP_STAGE_K if group_rows < MIXTURE_GROUP_BLOCKS[-1] and rows < MIXTURE_GROUP_WIDE_BELOW else 64


def mixture_group_stages(group_rows: int, stage_k: int = 64, swizzle: bool = False) -> int | None:
    """The grouped products' stages at `group_rows`, `stage_k` and the rows' layout (None: as many as the
    stage budget holds)."""
    table = MIXTURE_GROUP_STAGES_SWIZZLED if swizzle else MIXTURE_GROUP_STAGES
    return table.get(stage_k) if group_rows < MIXTURE_GROUP_BLOCKS[-1] else None


def mixture_group_spread(rows: int) -> bool:
    """Whether each block of a grouped product's segments has its own CTA at `rows` rows (see
    MIXTURE_GROUP_SPREAD_ROWS)."""
    return MIXTURE_GROUP_SPREAD_ROWS is not None and rows >= MIXTURE_GROUP_SPREAD_ROWS


def mixture_group_compact(rows: int) -> bool:
    """Whether the grouped products' grid at `rows` rows is compact (see MIXTURE_GROUP_COMPACT_ROWS)."""
    return MIXTURE_GROUP_COMPACT_ROWS is not None and MIXTURE_GROUP_COMPACT_ROWS <= rows < MIXTURE_GROUP_WIDE_BELOW


@dataclass(frozen=True)
class MixtureGroupedSpec(Spec):
    """A launch of the grouped path (`kernel`: mixture_groups, mixture_grouped_gated,
    mixture_grouped_down or mixture_sum): `rows` of `width` values, `top_k` of `experts` chosen a
    row (rows x top_k pairs), experts of `hidden` units and a shared expert of `shared_hidden`
    (0: none); x rows `x_pitch` apart; the grouped products' block of `group_rows`. A field left
    None is not the kernel's (mixture_groups reads only ids)."""

    kernel: str
    rows: int
    experts: int
    top_k: int
    width: int | None = None
    hidden: int | None = None
    shared_hidden: int = 0
    x_pitch: int | None = None
    group_rows: int | None = None  # the grouped products' block (MIXTURE_GROUP_BLOCKS)

    def problems(self) -> list[str]:
        found = [] if self.rows >= 1 else [f"needs at least one row; got {self.rows}"]
        if self.group_rows is not None and self.group_rows not in MIXTURE_GROUP_BLOCKS:
            found.append(f"group_rows {self.group_rows}: one of {', '.join(map(str, MIXTURE_GROUP_BLOCKS))} (an "
                         "expert's rows a pass over its weight tile)")
        if not 1 <= self.experts <= MIXTURE_MAX_EXPERTS:
            found.append(f"experts {self.experts}: 1-{MIXTURE_MAX_EXPERTS} (mixture_groups scans them with one warp)")
        if not 1 <= self.top_k <= min(self.experts, MIXTURE_MAX_WARPS):
            found.append(f"top_k {self.top_k}: 1 to the experts, at most {MIXTURE_MAX_WARPS}")
        if self.rows * self.top_k > MIXTURE_GROUP_MAX_PAIRS:
            found.append(f"{self.rows} rows x top_k {self.top_k} pairs: at most {MIXTURE_GROUP_MAX_PAIRS} (one CTA "
                         "groups them)")
        if self.width is not None:
            found += filter(None, [vector_width("width", self.width)])
            slots = self.top_k + (1 if self.shared_hidden else 0)
            if self.rows * slots * self.width >= INT32_ELEMENTS:
                found.append(f"{self.rows} rows x {slots} slots x width {self.width} partial sums: offsets are 32-bit, "
                             f"so below {INT32_ELEMENTS} values")
        if self.hidden is not None:
            found += filter(None, [vector_width("expert width", self.hidden)])
            if self.width is not None and max(self.hidden, self.shared_hidden) * self.width >= INT32_ELEMENTS:
                found.append(f"an expert of {max(self.hidden, self.shared_hidden)} x {self.width} values: offsets "
                             f"inside an expert are 32-bit, so below {INT32_ELEMENTS} values")
            if self.rows * self.top_k * self.hidden >= INT32_ELEMENTS:
                found.append(f"{self.rows * self.top_k} pairs x expert width {self.hidden}: offsets are 32-bit")
        if self.shared_hidden:
            found += filter(None, [vector_width("shared expert width", self.shared_hidden)])
        if self.x_pitch is not None and self.width is not None:
            found += filter(None, [row_pitch("x pitch", self.x_pitch, self.width)])
        return found


# ----------------------------------------------------------------------------------------------
# The linear-attention pieces that run where KdaSplit does not: conv (+ its L2 norm epilogue),
# kda_gate, delta_rule, head_norm (l2norm, head_norm, norm_gated) and part

CONV_MAX_WIDTH = 8  # taps a channel's thread keeps in registers: its window of the conv
CONV_NORM_MAX_HEAD = 1024  # one block of at most 1024 threads reduces a head, a channel a thread
LINEAR_MAX_TOKENS = 16  # speculative tokens a request (the interpreter's form: slots [batch, >= tokens])


def conv_norm_problems(head_size: int, channels: int) -> list[str]:
    """Why the conv's epilogue cannot take an L2 norm over heads of `head_size` values."""
    found = []
    if head_size > CONV_NORM_MAX_HEAD:
        found.append(f"head size {head_size} is above {CONV_NORM_MAX_HEAD}")
    if head_size % WARP:
        found.append(f"head size {head_size} is not a whole number of warps ({WARP})")
    if channels % head_size:
        found.append(f"head size {head_size} does not divide the conv's {channels} channels")
    return found


def slot_problems(batch: int, tokens: int, slot_columns: int, state_slots: int) -> list[str]:
    """Why a slot table of `batch` rows (`slot_columns` columns; 0: a [batch] table) cannot serve
    requests of `tokens` tokens over `state_slots` slots."""
    found = []
    if batch < 1:
        found.append(f"needs at least one request; got batch {batch}")
    if not 1 <= tokens <= LINEAR_MAX_TOKENS:
        found.append(f"supports 1-{LINEAR_MAX_TOKENS} tokens a request; got {tokens}")
    if tokens > 1 and slot_columns < tokens:
        found.append(f"a step of {tokens} tokens reads slots [batch, >= {tokens}]; got {slot_columns} columns")
    if slot_columns < 0:
        found.append(f"slot_columns is 0 (a [batch] table) or the table's columns; got {slot_columns}")
    if state_slots < 2:
        found.append(f"needs at least 2 state slots (slot 0 is padding); got {state_slots}")
    return found


@dataclass(frozen=True)
class ConvSpec(Spec):
    """A launch of conv: `batch` requests of `tokens`, `channels` of a conv of `width` taps, its
    state [`state_slots`, `state_channels`, width - 2 + tokens] from channel `offset`; with
    `norm_heads`, an L2 norm over heads of channels / norm_heads in the epilogue."""

    kernel: ClassVar[str] = "conv"
    batch: int
    tokens: int
    channels: int
    width: int
    state_slots: int
    state_channels: int
    offset: int = 0
    norm_heads: int | None = None
    slot_columns: int = 0
    x_pitch: int | None = None

    def problems(self) -> list[str]:
        found = slot_problems(self.batch, self.tokens, self.slot_columns, self.state_slots)
        if not 2 <= self.width <= CONV_MAX_WIDTH:
            found.append(f"width {self.width}: 2 to {CONV_MAX_WIDTH} taps (a channel's window is held in registers)")
        if self.channels < 1 or self.offset < 0 or self.offset + self.channels > self.state_channels:
            found.append(f"channels [{self.offset}, {self.offset + self.channels}) must fit the state's "
                         f"{self.state_channels}")
        if self.norm_heads is not None:
            if self.norm_heads < 1 or self.channels % self.norm_heads:
                found.append(f"{self.channels} channels do not split into {self.norm_heads} heads")
            else:
                found += conv_norm_problems(self.channels // self.norm_heads, self.channels)
        if self.x_pitch is not None and self.x_pitch < self.channels:
            found.append(f"x pitch {self.x_pitch} is below the row's {self.channels} values")
        return found


@dataclass(frozen=True)
class KdaGateSpec(Spec):
    """A launch of kda_gate: `rows` of `heads` x `size` raw gates (a decay each; size 1: one a
    head), `form` lower_bound or softplus, g rows `g_pitch` apart."""

    kernel: ClassVar[str] = "kda_gate"
    rows: int
    heads: int
    size: int
    form: str = "softplus"
    lower_bound: float | None = None
    g_pitch: int | None = None

    def problems(self) -> list[str]:
        found = []
        if self.rows < 1 or self.heads < 1 or self.size < 1:
            found.append(f"needs rows, heads and a head size of at least 1; got {self.rows}, {self.heads}, {self.size}")
        if self.form not in KDA_GATE_FORMS:
            found.append(f"form is one of {KDA_GATE_FORMS}; got {self.form!r}")
        if self.form == "lower_bound" and self.lower_bound is None:
            found.append("the lower_bound form needs lower_bound")
        if self.g_pitch is not None and self.g_pitch < self.heads * self.size:
            found.append(f"g pitch {self.g_pitch} is below the row's {self.heads * self.size} values")
        return found


DELTA_KEYS = (16, 32, 64, 128, 256)  # key head sizes: a row's keys spread over a power of two of lanes
DELTA_ROW_VALUES = 64  # fp32 state values a thread holds in registers at most
DELTA_THREADS = 256  # a CTA's threads: value rows of a head side by side


@dataclass(frozen=True)
class DeltaRuleSpec(Spec):
    """A launch of delta_rule: `batch` requests of `tokens`, `heads` value heads of `value` sharing
    `key_heads` key heads of `key`, a decay a key (`per_key`) or a head, the state
    [`state_slots`, heads, value, key] fp32; `split` CTAs a request's head (value rows apart)."""

    kernel: ClassVar[str] = "delta_rule"
    batch: int
    tokens: int
    heads: int
    key_heads: int
    key: int
    value: int
    state_slots: int
    per_key: bool = True
    split: int = 1
    slot_columns: int = 0

    def problems(self) -> list[str]:
        found = slot_problems(self.batch, self.tokens, self.slot_columns, self.state_slots)
        if self.key_heads < 1 or self.heads % self.key_heads:
            found.append(f"{self.heads} value heads do not share {self.key_heads} key heads evenly")
        if self.key not in DELTA_KEYS:
            found.append(f"key head size {self.key}: one of {DELTA_KEYS} (a row's keys over a power of two of lanes, "
                         "four or more a lane)")
        if self.split < 1 or self.value % self.split or (self.value // self.split) % 4:
            found.append(f"value head size {self.value} must split into {self.split} CTAs of whole 4-row groups")
        elif self.key in DELTA_KEYS and self.key * self.value // self.split > DELTA_ROW_VALUES * DELTA_THREADS:
            found.append(f"a CTA's state of {self.value // self.split} x {self.key} values exceeds "
                         f"{DELTA_ROW_VALUES} registers a thread of {DELTA_THREADS}: split the rows over more CTAs")
        return found


HEAD_NORM_GATES = ("sigmoid", "swish")
HEAD_NORM_MAX = 1024  # a head's values over one warp: at most 32 a lane


@dataclass(frozen=True)
class HeadNormSpec(Spec):
    """A launch of head_norm: `rows` of `heads` x `size`, each head scaled by rsqrt(mean(x^2) +
    eps) (`mean`) or rsqrt(sum(x^2) + eps) (an L2 norm), times a weight of one head's size
    (`weight`), times act(gate) (`gate`: sigmoid or swish); x and gate rows their pitches apart."""

    kernel: ClassVar[str] = "head_norm"
    rows: int
    heads: int
    size: int
    eps: float = 1e-6
    mean: bool = True
    weight: bool = True
    gate: str | None = None
    x_pitch: int | None = None
    gate_pitch: int | None = None
    quantize: int = 0  # words a value of the quantized form y is written in (0: bf16 y)

    def problems(self) -> list[str]:
        found = []
        if self.quantize:
            found += [f"its quantize epilogue: {problem}" for problem in
                      quantized_problems(self.heads * self.size, self.quantize)]
            if self.size % 32:
                found.append(f"its quantize epilogue: head size {self.size} is not whole 32-value blocks (a "
                             "warp quantizes its head's blocks)")
        if self.rows < 1 or self.heads < 1:
            found.append(f"needs at least one row and one head; got rows {self.rows}, heads {self.heads}")
        if not 1 <= self.size <= HEAD_NORM_MAX:
            found.append(f"head size {self.size}: 1 to {HEAD_NORM_MAX} (a head over one warp)")
        if not self.eps > 0:
            found.append(f"eps must be positive; got {self.eps}")
        if self.gate is not None and self.gate not in HEAD_NORM_GATES:
            found.append(f"gate activation {self.gate!r}: one of {HEAD_NORM_GATES}")
        width = self.heads * self.size
        for what, pitch in (("x pitch", self.x_pitch), ("gate pitch", self.gate_pitch)):
            if pitch is not None and pitch < width:
                found.append(f"{what} {pitch} is below the row's {width} values")
        return found


@dataclass(frozen=True)
class PartSpec(Spec):
    """A launch of part: `rows` of `heads` units of `unit` values (rows `x_pitch` apart); each
    head's values [offset, offset + length) copied to a row of heads x length."""

    kernel: ClassVar[str] = "part"
    rows: int
    heads: int
    unit: int
    offset: int
    length: int
    x_pitch: int | None = None

    def problems(self) -> list[str]:
        found = []
        if self.rows < 1 or self.heads < 1:
            found.append(f"needs at least one row and one head; got rows {self.rows}, heads {self.heads}")
        if self.offset < 0 or self.length < 1 or self.offset + self.length > self.unit:
            found.append(f"part [{self.offset}, {self.offset + self.length}) does not fit a unit of {self.unit}")
        if self.x_pitch is not None and self.x_pitch < self.heads * self.unit:
            found.append(f"x pitch {self.x_pitch} is below the row's {self.heads * self.unit} values")
        return found
