"""A tensor-parallel rank's seeded weights made on its GPU (gpu_seeding.Cut, `fill`), on the CPU:
`fill` runs against an emulated device (numpy memory, the seeder kernel as its numpy twin, the
driver's copies as cuMemcpy2D defines them) for each rank of plans compiled with --tp 2 and 4, and
every buffer it fills holds the bits the host makes for that rank: its part of the whole model's
seeded tensors (`parallel.whole_sources`, cut by the rank's shard). Parts cut in pieces (a row-
parallel product's columns) go through the whole tensor and a strided copy; the rest straight."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.interp.tp import sliced
from lanec.runtime import dtypes, gpu_seeding, parallel, seeded, weights
from lanec.runtime.plan import Plan

ROOT = Path(__file__).resolve().parents[1]


class Memory:
    """Device memory as numpy bytes: allocations at distinct addresses, pointers into them."""

    def __init__(self):
        self.blocks: dict[int, np.ndarray] = {}
        self.next = 1 << 32

    def alloc(self, nbytes: int) -> int:
        address, self.next = self.next, self.next + max(int(nbytes), 1) + (1 << 20)
        self.blocks[address] = np.full(max(int(nbytes), 1), 0xAB, np.uint8)  # garbage, as cuMemAlloc's
        return address

    def view(self, address: int, nbytes: int) -> np.ndarray:
        base = max(b for b in self.blocks if b <= address)
        block, at = self.blocks[base], address - base
        assert at + nbytes <= block.size, "an access past its allocation"
        return block[at: at + nbytes]


def emulated(monkeypatch, memory: Memory, count: int):
    """The driver `fill` calls, on `memory`; the seeder makes `count` values a launch."""
    from lanec.runtime import driver

    class Buffer:
        def __init__(self, nbytes):
            self.nbytes, self.ptr = int(nbytes), memory.alloc(nbytes)

        @classmethod
        def empty(cls, nbytes):
            return cls(nbytes)

        @classmethod
        def from_array(cls, array):
            array = np.ascontiguousarray(array)
            buffer = cls(array.nbytes)
            memory.view(buffer.ptr, array.nbytes)[:] = array.view(np.uint8).ravel()
            return buffer

        def fill(self, byte):
            memory.view(self.ptr, self.nbytes)[:] = byte

        def free(self):
            pass

    class Function:
        def __init__(self, dtype):
            self.dtype = dtype

    class Module:
        def __init__(self, cubin):
            self.dtype = cubin.decode()

        def function(self, entry, shape):
            return Function(self.dtype)

    def launch(function, shape, pointers, stream):
        key_ptr, affine_ptr, out = pointers
        key = int(memory.view(key_ptr, 8).view(np.uint64)[0])
        step, center = memory.view(affine_ptr, 8).view(np.float32)
        values = np.empty(count, np.float32)
        seeded._fill(values, key, 0, np.float32(step), np.float32(center))
        stored = np.asarray(dtypes.encode(dtypes.representable(values, function.dtype), function.dtype))
        memory.view(out, stored.nbytes)[:] = stored.view(np.uint8).ravel()

    def copy_async(target, source, nbytes, stream):
        memory.view(target, nbytes)[:] = memory.view(source, nbytes).copy()

    def copy_2d_async(target, target_pitch, source, source_pitch, width, rows, stream):
        assert width <= target_pitch and width <= source_pitch
        for row in range(rows):
            copy_async(target + row * target_pitch, source + row * source_pitch, width, stream)

    monkeypatch.setattr(driver, "Buffer", Buffer)
    monkeypatch.setattr(driver, "Module", Module)
    monkeypatch.setattr(driver, "launch", launch)
    monkeypatch.setattr(driver, "copy_async", copy_async)
    monkeypatch.setattr(driver, "copy_2d_async", copy_2d_async)
    monkeypatch.setattr(gpu_seeding, "SEEDER_COUNT", count)
    return Buffer


@pytest.fixture(scope="module")
def tp_plans(tmp_path_factory) -> dict[str, Plan]:
    folder = tmp_path_factory.mktemp("tp-seeding")
    made = {}
    for name, form, ranks in (("dense-tp2", ROOT / "examples" / "dense-small.mlir", 2),
                              ("dense-tp4", ROOT / "examples" / "dense-small.mlir", 4)):
        result = CliRunner().invoke(main, ["compile", "--tp", str(ranks), str(form), "-o", str(folder / f"{name}.plan")])
        assert result.exit_code == 0, result.output
        made[name] = Plan.read(folder / f"{name}.plan")
    return made


def with_seeders(plan: Plan) -> Plan:
    """The plan's seeders, their cubins the emulated module's dtype."""
    from dataclasses import replace

    return replace(plan, seeders=[replace(s, cubin=s.dtype.encode()) for s in plan.seeders])


@pytest.mark.parametrize("name", ["dense-tp2", "dense-tp4"])
def test_each_ranks_seeded_parts_made_on_the_gpu_are_its_slices_of_the_whole(name, tp_plans, monkeypatch):
    from dataclasses import replace

    plan = tp_plans[name]  # its bindings of up to 4M values (the lm head and embed table: the same arithmetic)
    plan = replace(plan, weights=[b for b in plan.weights if math.prod(plan.buffer(b.buffer).shape) <= 1 << 22])
    whole = parallel.whole_sources(plan, 13, lazy=True)
    memory = Memory()
    Buffer = emulated(monkeypatch, memory, count=1 << 18)  # a whole tensor in several launches, the last short
    cuts = set()
    for rank in range(plan.ranks):
        mine = with_seeders(parallel.rank_plan(plan, rank))
        shards = {s.name: s.shard for b in mine.weights for s in b.sources}
        parts = parallel.RankSources(whole, shards)
        bound = {b.buffer for b in mine.weights}
        buffers = {b.name: Buffer(b.nbytes) for b in mine.buffers if b.name in bound}
        filled = gpu_seeding.fill(mine, buffers, 13, stream=type("S", (), {"synchronize": lambda self: None})())
        assert filled, "no binding was filled on the GPU"
        for binding in mine.weights:
            if binding.buffer not in filled:
                continue
            for source in binding.sources:
                cut = gpu_seeding.cut_of(source)
                cuts.add("whole" if cut is None else "range" if cut.contiguous else "pieces")
            spec = mine.buffer(binding.buffer)
            want = np.asarray(weights.make(binding, parts, mine)).view(np.uint8).ravel()
            got = memory.view(buffers[binding.buffer].ptr, spec.nbytes)
            assert np.array_equal(got, want), f"rank {rank}: {binding.buffer}"
            twin = np.asarray(dtypes.encode(gpu_seeding.host_values(binding, mine, 13), spec.dtype))
            assert np.array_equal(twin.view(np.uint8).ravel(), want), f"rank {rank}: {binding.buffer} (host twin)"
    assert {"range", "pieces"} <= cuts  # column-parallel parts and row-parallel ones both made


def test_a_cut_names_the_runs_of_the_whole_its_part_reads():
    from lanec.runtime.plan import Source

    rows = gpu_seeding.cut_of(Source("w", (4, 6), shard="dim 0 part 1 of 2"))
    assert rows.contiguous and rows.pieces == ((24, 24, 0),)
    columns = gpu_seeding.cut_of(Source("w", (8, 3), shard="dim 1 part 1 of 2"))
    assert not columns.contiguous and (columns.rows, columns.stride, columns.span) == (8, 6, 3)
    assert columns.pieces == ((3, 3, 0),)
    segments = gpu_seeding.cut_of(Source("c", (2, 6, 4), shard="dim 1 part 0 of 2 in 4+8"))
    assert segments.rows == 2 and segments.stride == 12 * 4 and segments.pieces == ((0, 8, 0), (16, 16, 8))
    whole = np.arange(math.prod((2, 12, 4))).reshape(2, 12, 4)
    part = sliced(whole, "dim 1 part 0 of 2 in 4+8", "c").ravel()
    flat = whole.ravel()
    pieced = np.concatenate([np.concatenate([flat[r * segments.stride + s: r * segments.stride + s + w]
                                             for s, w, _ in segments.pieces]) for r in range(segments.rows)])
    assert np.array_equal(part, pieced)
