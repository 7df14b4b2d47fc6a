"""Seeded weights made on the GPU: a plan carries the `seeded` kernel (`Plan.seeders`, one a
dtype), and a weight buffer whose sources are all seeded and whose binding only places them
(`none`; `concatenate` or `stack` on the first axis; `interleave` of row tiles) is filled there,
each source's values generated straight into their place, instead of being made on the host and
uploaded: a real-size model (98 GB of Kimi-Linear-48B-A3B) is made in well under a second, and
the host holds none of it. Other bindings (a transpose, a slice, q8_0 quantization) go the host's
way (`weights.make`). Both give the same bits: the kernel is the numpy twin's, bit for bit.

`placements` is plain arithmetic (tested on the CPU against `weights.make`); `fill` launches."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lanec.runtime import dtypes, seeded
from lanec.runtime.plan import Plan, WeightBinding

SEEDED_DTYPES = ("bfloat16", "float32")
SEEDER_COUNT = 1 << 22  # values a seeder launch makes; a shorter run goes through a scratch buffer
WHOLE = " whole"  # fill's scratch place for a whole tensor a part cut in pieces is copied out of


@dataclass(frozen=True)
class Placement:
    """Values [start, start + count) of source `source` (its flat indices) land at the buffer's
    flat element `offset` onwards."""

    source: int
    start: int
    count: int
    offset: int


@dataclass(frozen=True)
class Cut:
    """Where a sharded source's values (a rank's part of a checkpoint tensor, `Source.shard`) lie in
    the whole tensor's flat indices, which its seeded values are a function of: `rows` runs (the
    whole's dimensions before the cut, flattened), `stride` values apart; from each, every piece
    (start in the run, width, start in the part's run of `span` values) is the rank's."""

    rows: int
    stride: int
    span: int
    pieces: tuple[tuple[int, int, int], ...]

    @property
    def contiguous(self) -> bool:
        """One range of the whole (a cut of the first dimension, or of one after dimensions of 1)."""
        return self.rows == 1 and len(self.pieces) == 1


def cut_of(source) -> Cut | None:
    """The `Cut` of a sharded source (None: the source is whole)."""
    if not source.shard:
        return None
    from lanec.interp.tp import Shard

    shard = Shard.parse(source.shard)
    whole = shard.whole(source.shape)
    inner = math.prod(whole[shard.dim + 1:])
    pieces, start, at = [], 0, 0
    for width in shard.segments or (whole[shard.dim],):
        size = width // shard.parts
        pieces.append(((start + shard.part * size) * inner, size * inner, at))
        start, at = start + width, at + size * inner
    return Cut(math.prod(whole[:shard.dim]), whole[shard.dim] * inner, at, tuple(pieces))


def placements(binding: WeightBinding, plan: Plan) -> list[Placement] | None:
    """Where each source's values go in the buffer (None: the binding does more than place them,
    or a source's dtype is not the buffer's, or it places part of a source cut in pieces). Elements
    no placement covers are zeros (a concatenation's alignment padding)."""
    found = _placements(binding, plan)
    for p in found or []:
        source = binding.sources[p.source]
        cut = cut_of(source)
        if cut is not None and not cut.contiguous and (p.start, p.count) != (0, math.prod(source.shape)):
            return None  # a tile of a part cut in pieces: the host's
    return found


def _placements(binding: WeightBinding, plan: Plan) -> list[Placement] | None:
    buffer = plan.buffer(binding.buffer)
    dtype = dtypes.canonical(buffer.dtype)
    if dtype not in SEEDED_DTYPES or any(dtypes.canonical(s.dtype) != dtype for s in binding.sources):
        return None
    sizes = [math.prod(s.shape) for s in binding.sources]
    if not binding.transforms or (len(binding.transforms) == 1 and binding.transforms[0].kind == "none"):
        return [Placement(0, 0, sizes[0], 0)] if len(binding.sources) == 1 else None
    if len(binding.transforms) != 1:
        return None
    transform = binding.transforms[0]
    params = transform.params
    if transform.kind in ("concatenate", "stack") and int(params.get("axis", 0)) == 0:
        align = int(params.get("align", 1)) if transform.kind == "concatenate" else 1
        found, offset = [], 0
        for index, source in enumerate(binding.sources):
            if transform.kind == "stack" and source.shape != binding.sources[0].shape:
                return None
            found.append(Placement(index, 0, sizes[index], offset))
            rows = source.shape[0]
            width = sizes[index] // rows if rows else 0
            offset += (rows + (-rows % align)) * width
        return found
    if transform.kind == "interleave":
        rows, first = int(params["rows"]), binding.sources[0].shape
        if any(s.shape != first for s in binding.sources) or first[0] % rows:
            return None
        tile = rows * math.prod(first[1:])
        count = len(binding.sources)
        return [Placement(s, t * tile, tile, (t * count + s) * tile)
                for t in range(first[0] // rows) for s in range(count)]
    return None


def host_values(binding: WeightBinding, plan: Plan, seed: int) -> np.ndarray:
    """The buffer's values as `placements` lays them out, made on the host (the CPU twin of `fill`,
    for tests): zeros, then each placement's seeded values."""
    buffer = plan.buffer(binding.buffer)
    out = np.zeros(math.prod(buffer.shape), np.float32)
    for p in placements(binding, plan) or []:
        source = binding.sources[p.source]
        if source.shard:  # a rank's part: the whole tensor's seeded values, cut
            from lanec.interp.tp import Shard

            shard = Shard.parse(source.shard)
            whole = shard.whole(source.shape)
            values = seeded.values(source.name, seed, 0, math.prod(whole), source.scale, source.center, source.dtype)
            part = shard.slice(np.asarray(values).reshape(whole), source.name).ravel()
            out[p.offset: p.offset + p.count] = part[p.start: p.start + p.count]
            continue
        out[p.offset: p.offset + p.count] = seeded.values(source.name, seed, p.start, p.count, source.scale,
                                                          source.center, source.dtype)
    return out.reshape(buffer.shape)


def fill(plan: Plan, buffers: dict, seed: int, stream) -> set[str]:
    """Fill every binding `placements` takes on the GPU with the plan's seeders; the names of the
    buffers filled (the rest are the host's to make)."""
    from lanec.runtime import driver

    seeders = {s.dtype: s for s in plan.seeders}
    work = []
    for binding in plan.weights:
        buffer = plan.buffer(binding.buffer)
        found = placements(binding, plan)
        if found is not None and dtypes.canonical(buffer.dtype) in seeders:
            work.append((binding, buffer, found))
    if not work:
        return set()
    modules = {dtype: driver.Module(s.cubin) for dtype, s in seeders.items()}
    functions = {dtype: modules[dtype].function(s.entry, s.shape) for dtype, s in seeders.items()}
    # every launch's key and affine, uploaded once: launch i reads key[i] and affine[i]
    # the work in stream order: ("run", dtype, key row, (place, byte offset), count) makes `count`
    # seeded values at that offset of `place` (a weight buffer's name, or WHOLE: the scratch buffer
    # a part cut in pieces is made in whole); ("cut", dtype, (place, byte offset), Cut) then copies
    # the part's pieces out of it
    work_items: list[tuple] = []
    keys, affines = [], []
    whole_values = 0  # the largest whole tensor a part cut in pieces is made from

    def runs(source, start: int, count: int, place: str, offset: int, itemsize: int, dtype: str) -> None:
        for done in range(0, count, SEEDER_COUNT):
            params = seeded.kernel_params(source.name, seed, start + done, source.scale, source.center)
            keys.append(params["key"])
            affines.append(params["affine"])
            work_items.append(("run", dtype, len(keys) - 1, (place, offset + done * itemsize),
                               min(SEEDER_COUNT, count - done)))

    for binding, buffer, found in work:
        dtype = dtypes.canonical(buffer.dtype)
        itemsize = dtypes.storage(dtype).itemsize
        covered = sum(p.count for p in found)
        if covered != math.prod(buffer.shape):
            buffers[binding.buffer].fill(0)  # alignment padding stays zero
        for p in found:
            source = binding.sources[p.source]
            target = (binding.buffer, p.offset * itemsize)
            cut = cut_of(source)
            if cut is None or cut.contiguous:  # the values of one range of the whole
                runs(source, p.start + (cut.pieces[0][0] if cut else 0), p.count, *target, itemsize, dtype)
                continue
            whole_values = max(whole_values, cut.rows * cut.stride)
            runs(source, 0, cut.rows * cut.stride, WHOLE, 0, itemsize, dtype)
            work_items.append(("cut", dtype, target, cut))
    key_buffer = driver.Buffer.from_array(np.stack(keys).astype(np.int32))
    affine_buffer = driver.Buffer.from_array(np.stack(affines).astype(np.float32))
    scratch = {dtype: driver.Buffer.empty(SEEDER_COUNT * dtypes.storage(dtype).itemsize) for dtype in seeders}
    widest = max(dtypes.storage(d).itemsize for d in seeders)
    places = {**buffers, **({WHOLE: driver.Buffer.empty(whole_values * widest)} if whole_values else {})}
    try:
        for item in work_items:
            dtype, itemsize = item[1], dtypes.storage(item[1]).itemsize
            if item[0] == "cut":
                _, _, (place, offset), cut = item
                target, whole = places[place].ptr + offset, places[WHOLE].ptr
                for start, width, at in cut.pieces:  # each piece of every run: one 2D copy
                    driver.copy_2d_async(target + at * itemsize, cut.span * itemsize, whole + start * itemsize,
                                         cut.stride * itemsize, width * itemsize, cut.rows, stream)
                continue
            _, _, row, (place, offset), count = item
            target = places[place].ptr + offset
            full = count == SEEDER_COUNT
            out = target if full else scratch[dtype].ptr
            driver.launch(functions[dtype], seeders[dtype].shape, [key_buffer.ptr + 8 * row,
                                                                   affine_buffer.ptr + 8 * row, out], stream)
            if not full:  # a shorter run: made in the scratch buffer, its first `count` values copied
                driver.copy_async(target, scratch[dtype].ptr, count * itemsize, stream)
        stream.synchronize()
    finally:
        for b in (key_buffer, affine_buffer, *scratch.values(), *([places[WHOLE]] if WHOLE in places else [])):
            b.free()
    return {binding.buffer for binding, _, _ in work}
