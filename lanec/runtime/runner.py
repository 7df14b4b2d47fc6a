"""Run a plan: load it, make its buffers (weights through their transforms, states and inputs from
one seeded environment), launch the step with PDL and clusters, capture it into a CUDA graph, run
N steps and time them; or `--check` one step against the interpreter, `--interpret` the plan's
program on the CPU alone, or `--serve` N steps as a server drives them (lanec/runtime/serve.py).
The step's slot table, page table and positions are validated before anything is uploaded
(`validate_inputs`: one-line errors, nothing written), and a plan larger than the GPU's free
memory is refused before anything is allocated (`check_memory`).

The interpreter (`lanec.interp`, numpy only) is imported where a program runs; the GPU path
needs nothing but numpy and cuda.bindings."""

from __future__ import annotations

import functools
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from lanec.interp import ops
from lanec.runtime import driver, dtypes, gpu_seeding, tolerance, weights
from lanec.runtime.driver import DeviceError
from lanec.runtime.plan import Plan, PlanError, routing_buffer
from lanec.runtime.tolerance import Tolerance
from lanec.runtime.weights import WeightError

SLOT_STATES = ("conv", "recurrent")
CACHE_STATES = ("kv", "latent")
ALL_REDUCE_VARIABLE = "LANEC_ALL_REDUCE"  # a plan for several ranks: which all-reduce runs (Session._collectives)
ALL_REDUCE_ENGINES = ("auto", "nccl", "oneshot", "oneshot-apart")
L2_STATES_VARIABLE = "LANEC_L2_STATES"  # `off`, `auto`, or a hit ratio: the states' lines persist in L2 (l2_windows)


class RunError(ValueError):
    """Inputs or options a plan cannot run with (one line)."""


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors that are the user's to fix: printed as one line, never a traceback."""
    from lanec.interp.ops import InterpretError

    return PlanError, WeightError, DeviceError, RunError, InterpretError


@dataclass(frozen=True)
class Options:
    steps: int = 10
    check: bool = False
    interpret: bool = False
    graph: bool = True
    pdl: bool = True
    seed: int = 0
    weights: Path | None = None
    repeats: int = 20
    profile: bool = False
    trace: Path | None = None  # implies profile
    gpu_seeding: bool = True  # seeded weights made by the plan's seeders on the GPU (gpu_seeding.py)
    context: int | None = None  # a full batch served at this context (served_inputs); None: the seeded inputs
    tp: int | None = None  # the ranks to run on (None: the plan's; a plan for N ranks runs on N)
    outputs: Path | None = None  # with --check: the GPU's outputs (rank 0's) saved here (.npz)
    serve: int | None = None  # serve this many consecutive steps, states carried (lanec/runtime/serve.py)
    check_every: int | None = None  # with --serve: a drift check of every K-th step (and the last)
    churn: int | None = None  # with --serve: every P steps a request leaves and another joins


def validate_slots(slots: np.ndarray, tokens: int, accepted: np.ndarray | None = None,
                   capacity: int | None = None) -> None:
    """A slot table as the kernels read it (docs/semantics.md): tokens = 1, `[B]` or `[B, n]`
    (column 0); tokens = q > 1, `[B, >= q]` with `accepted [B]` in 1..q, a request padding when
    `slots[b, accepted - 1] <= 0`. Slots <= 0 are padding; every slot an active request reads or
    writes is distinct from every other request's and below the states' capacity."""
    slots = np.asarray(slots)
    if not np.issubdtype(slots.dtype, np.integer):
        raise RunError(f"the slot table holds {slots.dtype}; slots are integers")
    if slots.ndim not in (1, 2):
        raise RunError(f"the slot table is {list(slots.shape)}: [batch] or [batch, n]")
    table = slots.reshape(slots.shape[0], -1)
    batch = table.shape[0]
    if tokens == 1:
        used = [[int(table[b, 0])] if table[b, 0] > 0 else [] for b in range(batch)]
    else:
        if table.shape[1] < tokens:
            raise RunError(f"the slot table is {list(slots.shape)}: a step of {tokens} tokens needs "
                           f"[batch, >= {tokens}]")
        if accepted is None:
            raise RunError(f"a step of {tokens} tokens needs the accepted counts beside its slot table")
        accepted = np.asarray(accepted).reshape(-1)
        if accepted.shape[0] != batch:
            raise RunError(f"accepted has {accepted.shape[0]} entries; the slot table has {batch} requests")
        bad = np.flatnonzero((accepted < 1) | (accepted > tokens))
        if bad.size:
            raise RunError(f"request {bad[0]} accepted {accepted[bad[0]]} tokens: between 1 and {tokens}")
        used = [[int(s) for s in table[b, :tokens] if s > 0] if table[b, accepted[b] - 1] > 0 else []
                for b in range(batch)]
    owner: dict[int, int] = {}
    for request, request_slots in enumerate(used):
        for slot in request_slots:
            if capacity is not None and slot >= capacity:
                raise RunError(f"request {request} uses slot {slot}; the states hold slots 1..{capacity - 1}")
            if slot in owner:
                who = "twice" if owner[slot] == request else f"and so does request {owner[slot]}"
                raise RunError(f"request {request} uses slot {slot} {who}: active requests own distinct slots")
            owner[slot] = request


def validate_pages(pages: np.ndarray, positions: np.ndarray, tokens: int, page_size: int, cache_pages: int) -> None:
    """A page table and positions as the attention kernels read them (docs/semantics.md): request
    b's rows b * tokens .. hold consecutive positions from 0 up; position p lies in page
    pages[b, p // page_size] at row p % page_size; every page a request reaches (columns 0 up to
    its last position's) is one of the cache's 0..cache_pages - 1 (a negative entry: a page the
    request does not hold); no two requests write one page row."""
    pages, positions = np.asarray(pages), np.asarray(positions)
    for name, values in (("page table", pages), ("positions", positions)):
        if not np.issubdtype(values.dtype, np.integer):
            raise RunError(f"the {name} holds {values.dtype}; it holds integers")
    if pages.ndim != 2:
        raise RunError(f"the page table is {list(pages.shape)}: [batch, pages]")
    batch = pages.shape[0]
    if positions.shape != (batch * tokens,):
        raise RunError(f"the positions are {list(positions.shape)}; {batch} requests of {tokens} tokens need "
                       f"[{batch * tokens}]")
    table = positions.astype(np.int64).reshape(batch, tokens)
    pages = pages.astype(np.int64)
    if pages_readable(pages, table, page_size, cache_pages):
        return
    owner: dict[tuple[int, int], int] = {}  # request by request, for the first fault's message
    for b, row in enumerate(table):
        if row[0] < 0:
            raise RunError(f"request {b} starts at position {row[0]}: positions start at 0")
        if (np.diff(row) != 1).any():
            raise RunError(f"request {b} holds positions {row.tolist()}: a request's rows are consecutive")
        column = row[-1] // page_size
        if column >= pages.shape[1]:
            raise RunError(f"request {b} reaches position {row[-1]}, page column {column}; the page table has "
                           f"{pages.shape[1]} columns")
        held = pages[b, : column + 1]
        if (held < 0).any():
            first = int(np.flatnonzero(held < 0)[0])
            raise RunError(f"request {b} reaches position {row[-1]} but holds no page in column {first} "
                           f"(positions {first * page_size}..{(first + 1) * page_size - 1})")
        if (held >= cache_pages).any():
            raise RunError(f"request {b} uses page {held[held >= cache_pages][0]}; the cache holds pages "
                           f"0..{cache_pages - 1}")
        for p in row:
            place = (int(pages[b, p // page_size]), int(p % page_size))
            if owner.setdefault(place, b) != b:
                raise RunError(f"requests {owner[place]} and {b} both write row {place[1]} of page {place[0]}: "
                               "a page row is one request's")


def pages_readable(pages: np.ndarray, table: np.ndarray, page_size: int, cache_pages: int) -> bool:
    """`validate_pages`'s rules over the whole batch at once (a served step validates every step):
    True where they all hold; False where one may not (the request-by-request walk then names it)."""
    if batch := table.shape[0]:
        if (table[:, 0] < 0).any() or (np.diff(table, axis=1) != 1).any():
            return False
        columns = table[:, -1] // page_size
        if (columns >= pages.shape[1]).any():
            return False
        held = pages[np.arange(pages.shape[1])[None, :] <= columns[:, None]]
        if (held < 0).any() or (held >= cache_pages).any():
            return False
        places = pages[np.arange(batch)[:, None], table // page_size] * page_size + table % page_size
        return np.unique(places).size == places.size
    return True


def validate_inputs(program, inputs: dict[str, np.ndarray]) -> None:
    """The step's slot table, page table and positions, before anything is written to the GPU."""
    if "slots" in inputs:
        capacity = min((s.shape[0] for s in program.states if s.kind in SLOT_STATES), default=None)
        validate_slots(inputs["slots"], program.tokens, inputs.get("accepted"), capacity)
    if "pages" in inputs:
        for cache_pages, page_size in sorted({tuple(s.shape[:2]) for s in program.states if s.kind in CACHE_STATES}):
            validate_pages(inputs["pages"], inputs["positions"], program.tokens, page_size, cache_pages)


def served_inputs(program, context: int | None, seed: int = 0) -> dict[str, np.ndarray]:
    """The inputs of a full batch served at `context` positions (None: the longest the plan's page
    table holds): every request active (request b owns slots 1 + b * tokens .., its accepted
    counts drawn in 1..tokens), its step's rows the last `tokens` of its context (positions
    context - tokens .. context - 1), each request its own pages (a random draw of the cache's),
    token ids drawn from the vocabulary. The step then reads `context` cache rows a request, as a
    server's step does at that length. A program without pages has no context: only its requests
    are made active."""
    shapes = {i.role: list(i.shape) for i in program.inputs}
    batch, tokens = program.batch, program.tokens
    rng = np.random.default_rng(seed)
    inputs: dict[str, np.ndarray] = {}
    if "tokens" in shapes:
        inputs["tokens"] = rng.integers(0, vocabulary(program), shapes["tokens"]).astype(np.int32)
    if "slots" in shapes:
        if any(s.kind in SLOT_STATES for s in program.states):
            slot_capacity(program)  # a full batch's slots fit
        width = shapes["slots"][1] if len(shapes["slots"]) == 2 else 1
        table = np.full((batch, width), -1, np.int64)
        table[:, :tokens] = 1 + np.arange(batch * tokens).reshape(batch, tokens)
        inputs["slots"] = table.reshape(shapes["slots"]).astype(np.int32)
    if "accepted" in shapes:
        inputs["accepted"] = rng.integers(1, tokens + 1, batch).astype(np.int32)
    if "pages" in shapes:
        columns = shapes["pages"][1]
        cache_pages, page_size = cache_geometry(program)
        context = columns * page_size if context is None else context
        if not tokens <= context <= columns * page_size:
            raise RunError(f"--context {context}: a request of {tokens} tokens a step holds {tokens} to "
                           f"{columns * page_size} positions in this plan ({columns} pages of {page_size} rows; "
                           "`lanec import --context-pages` sets the pages)")
        held = -(-context // page_size)
        if batch * held > cache_pages:
            raise RunError(f"--context {context}: {batch} requests need {batch * held} pages of {page_size} rows; "
                           f"the caches hold {cache_pages}")
        pages = np.full((batch, columns), -1, np.int64)
        pages[:, :held] = rng.permutation(cache_pages)[: batch * held].reshape(batch, held)
        inputs["pages"] = pages.astype(np.int32)
        if "positions" in shapes:
            rows = context - tokens + np.arange(tokens)
            inputs["positions"] = np.tile(rows, batch).astype(np.int32)
    return inputs


def slot_capacity(program) -> int:
    """The slots the plan's conv and recurrent states hold (0 is padding), checked to hold a full
    batch: every request's tokens a slot of its own."""
    batch, tokens = program.batch, program.tokens
    capacity = min((s.shape[0] for s in program.states if s.kind in SLOT_STATES), default=None)
    if capacity is None:
        raise RunError("the plan reads a slot table but holds no conv or recurrent state")
    if batch * tokens >= capacity:
        raise RunError(f"the states hold {capacity} slots (0 is padding); {batch} requests of {tokens} tokens "
                       f"need {batch * tokens + 1}")
    return capacity


def cache_geometry(program) -> tuple[int, int]:
    """(pages, rows a page) of the plan's paged caches: the fewest of each over its caches."""
    caches = [s.shape for s in program.states if s.kind in CACHE_STATES]
    if not caches:
        raise RunError("the plan reads a page table but holds no cache")
    return min(shape[0] for shape in caches), min(shape[1] for shape in caches)


def vocabulary(program) -> int:
    """The token ids a step may take: the rows of its smallest embedding table (32 without one)."""
    tables = {step.operands["table"] for step in program.steps if step.op == "embed"}
    return min((w.shape[0] for w in program.weights if w.value in tables), default=32)


def load(path: str | Path, options: Options):
    """The plan, its interpreter program, and the step's environment: seeded inputs and states,
    and the weight sources (checkpoint or seeded) the interpreter and the buffers share."""
    from lanec.interp.environment import random_environment

    plan, program, sources = load_plan(path, options)
    # the interpreter runs N decode steps, each request's positions moving on by its tokens: the
    # pages must hold them all (the GPU replays one step, the same positions, N times)
    env = random_environment(program, options.seed, weights=sources, steps=options.steps if options.interpret else 1)
    if options.context is not None:
        env.inputs.update(served_inputs(program, options.context, options.seed))
    validate_inputs(program, env.inputs)
    return plan, program, env, sources


def load_plan(path: str | Path, options: Options):
    """The plan, its interpreter program, and the weight sources (checkpoint or seeded) the
    interpreter and the buffers share, each checked against the program's declaration."""
    from lanec.interp.program import Program

    plan = Plan.read(path)
    if not plan.program:
        raise PlanError(f"{path} carries no interpreter program: recompile it with this lanec")
    program = Program.from_json(plan.program)
    return plan, program, plan_sources(plan, program, options, path)


def seeded_on_gpu(plan: Plan, options: Options) -> int | None:
    """The seed of the weights the GPU makes (None: `--host-seeding`, a checkpoint's, or a plan
    without seeders). The default since tests/gpu/test_seeding_on_gpu.py passed on the H200 (its
    placements bit for bit against the host's `weights.make`). A plan for several ranks seeds its
    ranks' parts there too: each part the whole tensor's values at its indices (`gpu_seeding.Cut`)."""
    return options.seed if options.gpu_seeding and options.weights is None and plan.seeders else None


def plan_sources(plan: Plan, program, options: Options, path: str | Path) -> dict[str, np.ndarray]:
    """The weight sources of a plan read from `path`: its checkpoint's (options.weights) or seeded;
    seeded ones the GPU makes stay lazy on the host (the interpreter makes only the rows it reads)."""
    checkpoint = weights.open_checkpoint(options.weights) if options.weights is not None else None
    sources = weights.sources(plan, options.seed, checkpoint, lazy=seeded_on_gpu(plan, options) is not None)
    for w in program.weights:
        if w.name not in sources:
            raise PlanError(f"{path}: the program reads weight {w.name!r}, which no binding of the plan sources")
        if list(sources[w.name].shape) != list(w.shape):
            raise PlanError(f"{path}: weight source {w.name!r} is {list(sources[w.name].shape)}; the program "
                            f"declares {list(w.shape)}")
    return sources


def check_memory(plan: Plan, free: int, device: str) -> None:
    """Refuse, before anything is allocated or written, a plan whose buffers exceed the GPU's free
    memory (cuMemGetInfo's): one line with what it needs, by role, and what is free."""
    needed = sum(b.nbytes for b in plan.buffers)
    if needed <= free:
        return
    roles: dict[str, int] = {}
    for spec in plan.buffers:
        group = {"weight": "weights", "state": "states and caches"}.get(spec.role, "activations and inputs")
        roles[group] = roles.get(group, 0) + spec.nbytes
    parts = ", ".join(f"{size(nbytes)} {group}" for group, nbytes in roles.items())
    raise DeviceError(f"the plan needs {size(needed)} of buffers ({parts}); {device} has {size(free)} free")


def check_residency(plan: Plan, sm_count: int, device: str) -> None:
    """A stream-K gemm_tc launch's CTAs wait on each other's partial tiles, so all of them must be
    resident at once, one an SM: a GPU with fewer SMs is refused before anything runs."""
    for launch in plan.launches:
        ctas = (launch.spec.get("schedule") or {}).get("stream")
        if ctas and ctas > sm_count:
            raise DeviceError(f"launch {launch.name!r} is stream-K over {ctas} CTAs that wait on each other, all "
                              f"resident at once, one an SM; {device} has {sm_count} SMs")


def size(nbytes: int) -> str:
    """A byte count in GiB (MiB, KiB or bytes where smaller)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} bytes"


def in_order(launches: list, places: list[int], collectives: list) -> list:
    """The step's launches with each collective right before the launch at its place (`places`, in
    order, as `Plan.validate` checks; a place past the last launch: after it)."""
    pending = list(zip(places, collectives))
    sequence = []
    for index, launch in enumerate(launches):
        while pending and pending[0][0] <= index:
            sequence.append(pending.pop(0)[1])
        sequence.append(launch)
    return sequence + [collective for _, collective in pending]


def touched_state_bytes(plan: Plan) -> int:
    """The state bytes one step can touch: a conv or recurrent state's slots but its padding slot
    0, a cache whole."""
    total = 0
    for spec in plan.buffers:
        if spec.role != "state":
            continue
        slot_state = spec.name.rsplit(".", 1)[-1] in SLOT_STATES and spec.shape[0] > 1
        total += spec.nbytes * (spec.shape[0] - 1) // spec.shape[0] if slot_state else spec.nbytes
    return total


def l2_windows(plan: Plan, setting: str, set_aside: int, widest: int) -> list[tuple[str, float] | None]:
    """Each launch's L2 access-policy window, by `setting` (LANEC_L2_STATES): none where `off`;
    else the largest state buffer the launch binds (at most `widest` bytes of it), its lines
    persisting at the hit ratio `setting` gives, or with `auto` at the share of the step's touched
    state bytes that the `set_aside` holds (1 where they all fit)."""
    if setting == "off" or set_aside <= 0:
        return [None] * len(plan.launches)
    if setting == "auto":
        ratio = min(1.0, set_aside / max(1, touched_state_bytes(plan)))
    else:
        try:
            ratio = float(setting)
        except ValueError:
            raise RunError(f"{L2_STATES_VARIABLE}={setting!r}: off, auto, or a hit ratio in (0, 1]") from None
        if not 0 < ratio <= 1:
            raise RunError(f"{L2_STATES_VARIABLE}={setting!r}: a hit ratio is in (0, 1]")
    states = {b.name: b for b in plan.buffers if b.role == "state"}
    windows = []
    for launch in plan.launches:
        bound = {a.buffer for a in launch.args if a.buffer in states}
        if not bound:
            windows.append(None)
            continue
        windows.append((max(bound, key=lambda name: (states[name].nbytes, name)), ratio))
    return windows


class Session:
    """A plan on the GPU: modules loaded, buffers made, every launch prepared once; a plan for
    several ranks runs one rank's step on GPU `device`, its all-reduces through `communicator`
    (lanec/runtime/collectives.py) in order with the launches."""

    def __init__(self, plan: Plan, env, sources: dict[str, np.ndarray], pdl: bool = True, seed: int | None = None,
                 device: int = 0, communicator=None):
        if plan.collectives and communicator is None:
            raise PlanError(f"a plan for {plan.ranks} ranks runs one rank a GPU, with NCCL: `lanec run --tp "
                            f"{plan.ranks}`")
        self.plan = plan
        self.device = driver.Device(device)
        check_residency(plan, self.device.sm_count, self.device.name)
        check_memory(plan, self.device.free_bytes(), self.device.name)
        self.stream = driver.Stream()
        self.graphs: list[driver.Graph] = []  # the step's captures, destroyed by release_graphs
        modules = [driver.Module(cubin) for cubin in plan.cubins]
        self.buffers = {b.name: driver.Buffer.empty(b.nbytes) for b in plan.buffers}
        # seeded weights (`seed` given: no checkpoint) are made on the GPU where the plan's seeders
        # can place them (gpu_seeding.py); the others are made on the host and uploaded
        made = gpu_seeding.fill(plan, self.buffers, seed, self.stream) if seed is not None else set()
        for binding in plan.weights:
            if binding.buffer not in made:
                self.buffers[binding.buffer].upload(weights.make(binding, sources, plan))
        self.load(env)
        self.launches = []
        # the TMA tensor maps the launches read, encoded over their windows' addresses
        self.maps = driver.TensorMaps(sum(a.map is not None for launch in plan.launches for a in launch.args))
        for launch, window in zip(plan.launches, self._l2_windows()):
            shape = launch.shape if pdl else replace(launch.shape, pdl=False)
            pointers = [self.address(a) if a.map is None else self.maps.address(self.address(a), a.map)
                        for a in launch.args]
            function = modules[launch.kernel].function(launch.entry, shape)
            self.launches.append(driver.Launch(function, shape, pointers, self.stream, window))
        self.maps.upload()
        self.peer = None  # the one-shot all-reduces' mapped memory (runtime/peer.py), where they run
        self.replaced: set[int] = set()  # launches an all_reduce_norm does (the rmsnorm after its all-reduce)
        self.collectives = self._collectives(communicator, modules, pdl) if plan.collectives else []
        self.sequence = [item for item in in_order(self.launches, [c.at for c in plan.collectives], self.collectives)
                         if not any(item is self.launches[i] for i in self.replaced)]

    def _l2_windows(self) -> list[driver.AccessWindow | None]:
        """The launches' L2 windows by LANEC_L2_STATES (l2_windows), with the context's set-aside
        made as large as the GPU allows where any launch has one."""
        setting = os.environ.get(L2_STATES_VARIABLE, "off").strip() or "off"
        most, widest = self.device.persisting_l2_max() if setting != "off" else (0, 0)
        wanted = min(most, touched_state_bytes(self.plan))
        self.l2_set_aside = self.device.set_persisting_l2(wanted) if wanted else 0
        found = []
        for chosen in l2_windows(self.plan, setting, self.l2_set_aside, widest):
            if chosen is None:
                found.append(None)
                continue
            name, ratio = chosen
            buffer = self.buffers[name]
            found.append(driver.AccessWindow(buffer.ptr, min(buffer.nbytes, widest), ratio))
        return found

    def _collectives(self, communicator, modules, pdl: bool) -> list:
        """Each all-reduce as NCCL's or as the plan's one-shot kernel, by LANEC_ALL_REDUCE: `nccl`,
        `oneshot` (every all-reduce: one without its kernel is an error; fused with the rmsnorm
        after it where the plan carries that kernel, `all_reduce_norm`), `oneshot-apart` (the same,
        never fused), or `auto` (the default: the one-shot where the plan carries one, fused where
        it can; bench/tp.py measures them all)."""
        from lanec.runtime import peer
        from lanec.runtime.collectives import PeerAllReduce

        engine = os.environ.get(ALL_REDUCE_VARIABLE, "auto").strip() or "auto"
        if engine not in ALL_REDUCE_ENGINES:
            raise PlanError(f"{ALL_REDUCE_VARIABLE}={engine!r}: one of {', '.join(ALL_REDUCE_ENGINES)}")
        plan = self.plan
        peered = [c for c in plan.collectives if c.oneshot is not None] if engine != "nccl" else []
        if engine.startswith("oneshot") and len(peered) < len(plan.collectives):
            missing = next(c for c in plan.collectives if c.oneshot is None)
            problems = peer.PeerLayout(missing.count, missing.dtype, plan.ranks).problems()
            raise PlanError(f"{ALL_REDUCE_VARIABLE}={engine}: {missing.name} has no one-shot kernel in the plan"
                            + (f" ({'; '.join(problems)})" if problems else " (recompile the plan with this lanec)"))
        fusing = {c.name for c in peered if c.fused is not None} if engine != "oneshot-apart" else set()
        offsets, total = {}, 0
        for c in peered:
            offsets[c.name] = total
            rows = c.fused.rows if c.name in fusing else 0  # all_reduce_norm's flags are a row's
            total += peer.PeerLayout(c.count, c.dtype, plan.ranks, rows).total
        if peered:
            self.peer = peer.PeerMemory(communicator, total, self.stream)
        made = []
        for c in plan.collectives:
            if c.name not in offsets:
                made.append(communicator.all_reduce(self.address(c.source), self.address(c.target), c.count, c.dtype,
                                                    self.stream, c.name))
                continue
            table = driver.Buffer.from_array(peer.table(communicator.rank,
                                                        [base + offsets[c.name] for base in self.peer.bases]))
            kernel, args = c.oneshot, [c.source, c.target]
            if c.name in fusing:  # the all-reduce and the rmsnorm launch after it as one
                kernel, args = c.fused, list(c.fused.args)
                self.replaced.add(c.fused.replaces)
            shape = kernel.shape if pdl else replace(kernel.shape, pdl=False)
            function = modules[kernel.kernel].function(kernel.entry, shape)
            launch = driver.Launch(function, shape, [*map(self.address, args), table.ptr], self.stream)
            made.append(PeerAllReduce(launch, table, c.name))
        return made

    def close_peers(self, barrier) -> None:
        """Unmap the peers' memory and free ours, behind `barrier` (no rank frees what another reads)."""
        if self.peer is not None:
            self.peer.close(barrier)
            self.peer = None

    def address(self, arg) -> int:
        return self.buffers[arg.buffer].ptr + arg.offset * dtypes.storage(self.plan.buffer(arg.buffer).dtype).itemsize

    def load(self, env) -> None:
        """Inputs and states from `env`; activations and outputs poisoned (NaN), so a value the
        step never writes shows."""
        for spec in self.plan.buffers:
            if spec.role in ("input", "state"):
                table = env.inputs if spec.role == "input" else env.states
                if spec.source not in table:
                    raise PlanError(f"{spec.role} buffer {spec.name!r} reads {spec.source!r}, which the "
                                    f"program does not have")
                values = np.asarray(table[spec.source])
                if values.size != spec.elements:
                    raise PlanError(f"{spec.role} buffer {spec.name!r} is {list(spec.shape)}; the program's "
                                    f"{spec.source!r} is {list(values.shape)}")
                self.buffers[spec.name].upload(dtypes.encode(values, spec.dtype))
            elif spec.role in ("activation", "output"):
                self.buffers[spec.name].fill(0xFF)

    def write(self, inputs: dict[str, np.ndarray]) -> None:
        """Upload new values of some inputs (by the program's input role) between steps; states,
        activations and outputs stay as the last step left them."""
        for spec in self.plan.buffers:
            if spec.role == "input" and spec.source in inputs:
                values = np.asarray(inputs[spec.source])
                if values.size != spec.elements:
                    raise PlanError(f"input buffer {spec.name!r} is {list(spec.shape)}; got {list(values.shape)}")
                self.buffers[spec.name].upload(dtypes.encode(values, spec.dtype))

    @functools.cached_property
    def slot_states(self) -> list:
        """The state buffers indexed by slot (conv, recurrent), by the plan's program."""
        from lanec.interp.program import Program

        kinds = {decl.name: decl.kind for decl in Program.from_json(self.plan.program).states} \
            if self.plan.program else {}
        return [spec for spec in self.plan.buffers if spec.role == "state" and kinds.get(spec.source) in SLOT_STATES]

    def zero_slots(self, slots: list[int]) -> None:
        """Zero the rows `slots` of every slot-indexed state (conv, recurrent): what a server does
        before a new request's first step reads its slot."""
        for spec in self.slot_states if slots else []:
            row = math.prod(spec.shape[1:]) * dtypes.storage(spec.dtype).itemsize
            for slot in slots:
                if not 0 < slot < spec.shape[0]:
                    raise RunError(f"slot {slot} is outside state {spec.name!r}: slots 1..{spec.shape[0] - 1}")
                self.buffers[spec.name].zero(slot * row, row)

    def enqueue(self) -> None:
        for item in self.sequence:
            item.enqueue()

    def step_function(self, graph: bool) -> Callable[[], None]:
        if not graph:
            return self.enqueue
        if self.collectives:  # NCCL connects its peers at a first collective: never inside a capture
            for collective in self.collectives:
                collective.enqueue()
            self.stream.synchronize()
        captured = driver.Graph.capture(self.stream, self.enqueue)
        self.graphs.append(captured)
        return lambda: captured.replay(self.stream)

    def release_graphs(self, wait: bool = True) -> None:
        """Destroy the step's captured graphs, after the stream's work where `wait` (a failing rank
        does not wait: a replay still running finishes before CUDA frees it). A graph that captured
        an NCCL all-reduce holds a reference on its communicator, and ncclCommDestroy (or
        ncclCommAbort) waits until every such graph is gone: a rank releases its graphs before it
        leaves its communicator."""
        if wait:
            self.stream.synchronize()
        while self.graphs:
            self.graphs.pop().destroy()

    def read_stored(self, name: str) -> np.ndarray:
        """The buffer as stored (bf16 as its uint16 words): what a bitwise comparison hashes."""
        spec = self.plan.buffer(name)
        return self.buffers[name].to_array(dtypes.storage(spec.dtype), spec.shape)

    def read(self, name: str) -> np.ndarray:
        return dtypes.decode(self.read_stored(name), self.plan.buffer(name).dtype)


@dataclass(frozen=True)
class Comparison:
    """One buffer's verdict: `error` is the largest |got - want| relative to the reference's
    largest magnitude (integers: the fraction of differing elements), `within` whether every
    element lies inside `tolerance`."""

    name: str
    role: str
    dtype: str
    error: float
    scale: float
    tolerance: Tolerance
    within: bool
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.note and self.within


def compare(name: str, role: str, dtype: str, got: np.ndarray, want: np.ndarray,
            bound: Tolerance | None = None) -> Comparison:
    """`got` (the GPU's) against `want` (the interpreter's), held to `bound` (by default the
    step's tolerance of `dtype`)."""
    dtype = dtypes.canonical(dtype)
    bound = tolerance.STEP[dtype] if bound is None else bound
    want = np.asarray(want)
    if got.size != want.size:
        return Comparison(name, role, dtype, math.inf, 0.0, bound, False,
                          f"shape {list(got.shape)} vs the interpreter's {list(want.shape)}")
    got = got.reshape(want.shape)
    within = not (bound.excess(got, want) > 0).any()
    if dtype not in dtypes.FLOATS:
        wrong = float(np.mean(got != want)) if want.size else 0.0
        return Comparison(name, role, dtype, wrong, 1.0, bound, within)
    unwritten = int(np.isnan(got).sum() - np.isnan(want).sum())
    if unwritten > 0:
        return Comparison(name, role, dtype, math.inf, 0.0, bound, False, f"{unwritten} NaN (never written?)")
    want = want.astype(np.float32)
    scale = float(np.nanmax(np.abs(want))) if want.size else 0.0
    difference = float(np.nanmax(np.abs(got - want))) if want.size else 0.0
    return Comparison(name, role, dtype, difference / max(scale, 1e-30) if difference else 0.0, scale, bound,
                      within)


def compare_choice(name: str, got: np.ndarray, logits: np.ndarray, bound: Tolerance | None = None) -> Comparison:
    """Chosen tokens (argmax) against the interpreter's logits: a row agrees where the logit of
    the token the GPU chose is within `bound` (the bf16 step tolerance) of the row's largest (a
    near tie may go either way); the error is the fraction of rows that do not."""
    bound = tolerance.STEP["bfloat16"] if bound is None else bound
    logits = np.asarray(logits, dtype=np.float32).reshape(got.size, -1)
    got = got.reshape(-1).astype(np.int64)
    if got.min(initial=0) < 0 or got.max(initial=0) >= logits.shape[1]:
        return Comparison(name, "output", "int32", math.inf, 0.0, tolerance.EXACT, False, "token ids out of range")
    scale = float(np.abs(logits).max()) if logits.size else 0.0
    chosen, best = logits[np.arange(got.size), got], logits.max(axis=1)
    wrong = best - chosen > bound.rtol * np.abs(best) + bound.atol * scale
    return Comparison(name, "output", "int32", float(wrong.mean()) if got.size else 0.0, 1.0, tolerance.EXACT,
                      not wrong.any(), "" if not wrong.any() else f"{int(wrong.sum())} rows chose a token far "
                      "from the best")


def check(plan: Plan, program, env, sources, options: Options, say: Callable[[str], None]) -> int:
    """One step on the GPU and on the interpreter from the same values; 0 when everything agrees.
    The interpreter rounds what the kernels store as bf16 (its `storage` mode), so the
    comparison measures the kernels' own arithmetic, not the storage format's. A mixture follows
    the experts the GPU's router chose where they are a near tie of its own choice (inputs that
    differ by bf16 rounding flips may route a row either way); a farther choice still differs."""
    session = Session(plan, env, sources, pdl=options.pdl, seed=seeded_on_gpu(plan, options))
    session.step_function(options.graph)()
    session.stream.synchronize()
    reference = env.copy()
    values: dict[int, np.ndarray] = {}
    routing = gpu_routing(session, program)
    outputs = program.run(reference, storage=True, values=values, routing=routing)
    for name, hint in routing.items():
        if hint.farther:
            say(f"routing: {name}: rows {hint.farther} of the GPU chose experts past a near tie "
                f"({hint.tie:.1e} of the row's largest score); the interpreter kept its own choice there")
    return judge(session, program, outputs, reference.states, values, options, say)


def gpu_routing(session: Session, program) -> dict[str, ops.Hint]:
    """The expert ids the GPU's routers chose, by router weight name (`Program.run`'s `routing`),
    each followed through near ties of the router's input drift: ROUTING_TIE grown with the
    router's depth as the step tolerance grows (`tolerance.deep`)."""
    held = {spec.name for spec in session.plan.buffers}
    depth = layer_depths(session.plan)
    return {decl.name: ops.Hint(session.read(routing_buffer(decl.name)),
                                ops.ROUTING_TIE * tolerance.growth(depth(decl.name)), [])
            for decl in program.weights if routing_buffer(decl.name) in held}


LAYER_PREFIX = re.compile(r"model\.layers\.(\d+)\.")


def layer_depths(plan: Plan) -> Callable[[str], int]:
    """A buffer's depth: the decoder layers its value is computed through (`tolerance.deep`). A
    state of layer i (`model.layers.<i>.`) is i + 1 deep; an output passed through all of them."""
    layers = [int(m.group(1)) for spec in plan.buffers if (m := LAYER_PREFIX.match(spec.name))]
    total = max(layers) + 1 if layers else 1

    def depth(name: str) -> int:
        match = LAYER_PREFIX.match(name)
        return int(match.group(1)) + 1 if match else total

    return depth


def judge(session: Session, program, outputs: list[np.ndarray], states: dict[str, np.ndarray],
          values: dict[int, np.ndarray], options: Options, say: Callable[[str], None]) -> int:
    """The GPU's outputs and states after one step against the interpreter's (`outputs`, `states`,
    every value in `values`), one line a buffer; 0 when all agree. With `options.outputs`, the
    GPU's outputs are saved there (.npz, `output<index>`)."""
    rows = verdicts(session, program, outputs, states, values)
    for line in table(rows):
        say(line)
    if options.outputs is not None:
        saved = {f"output{spec.source}": session.read(spec.name) for spec in session.plan.buffers
                 if spec.role == "output"}
        np.savez(options.outputs, **saved)
    return 1 if any(not r.ok for r in rows) else 0


def verdicts(session: Session, program, outputs: list[np.ndarray], states: dict[str, np.ndarray],
             values: dict[int, np.ndarray]) -> list[Comparison]:
    """Each output and state buffer of the GPU after one step against the interpreter's, each
    held to its dtype's step tolerance grown by its depth (`tolerance.deep`), and by ONE_WORD
    where the step reads one-word int8 activations (`tolerance.one_word`)."""
    plan = session.plan
    chosen_from = {step.results[0]: step.operands["x"] for step in program.steps if step.op == "argmax"}
    layers = layer_depths(plan)
    coarse = tolerance.reads_one_word(program)  # one-word int8 activations: ONE_WORD x the step's bounds

    def deep(bound: tolerance.Tolerance, name: str) -> tolerance.Tolerance:
        grown = tolerance.deep(bound, layers(name))
        return tolerance.one_word(grown) if coarse else grown

    rows = []
    for spec in plan.buffers:
        if spec.role == "output":
            if spec.source >= len(outputs):
                raise PlanError(f"output buffer {spec.name!r} is the program's output {spec.source}; "
                                f"it has {len(outputs)}")
            value = program.outputs[spec.source]
            bound = deep(tolerance.STEP[dtypes.canonical(spec.dtype)], spec.name)
            if value in chosen_from:
                rows.append(compare_choice(spec.name, session.read(spec.name), values[chosen_from[value]],
                                           deep(tolerance.STEP["bfloat16"], spec.name)))
            else:
                rows.append(compare(spec.name, "output", spec.dtype, session.read(spec.name), outputs[spec.source],
                                    bound))
        elif spec.role == "state":
            rows.append(compare(spec.name, "state", spec.dtype, session.read(spec.name),
                                states[spec.source], deep(tolerance.state(spec.dtype), spec.name)))
    if not rows:
        raise PlanError("the plan has no output or state buffer to check")
    return rows


def table(rows: list[Comparison]) -> list[str]:
    """The judge's table: one line a buffer, then the verdict."""
    width = max(len(r.name) for r in rows)
    lines = [f"{'buffer':<{width}}  role    dtype     max |err| / scale   tolerance  scale"]
    for r in rows:
        verdict = "ok" if r.ok else f"MISMATCH {r.note}".rstrip()
        lines.append(f"{r.name:<{width}}  {r.role:<6}  {r.dtype:<8}  {r.error:>17.3e}   {str(r.tolerance):>9}  "
                     f"{r.scale:<9.3g} {verdict}")
    failed = [r.name for r in rows if not r.ok]
    lines.append(f"check: {len(rows) - len(failed)} of {len(rows)} agree with the interpreter"
                 + (f"; mismatch in {', '.join(failed)}" if failed else ""))
    return lines


def bench(plan: Plan, env, sources, options: Options, say: Callable[[str], None]) -> int:
    """N steps, then the median step time and each launch timed alone."""
    return timings(Session(plan, env, sources, pdl=options.pdl, seed=seeded_on_gpu(plan, options)), options, say)


def timings(session: Session, options: Options, say: Callable[[str], None]) -> int:
    """`bench` on a session: N steps, the median step, each launch alone; a plan for several ranks
    also times its all-reduces alone, in a graph of their own (every rank runs the same calls, so
    each collective meets its peers)."""
    plan = session.plan
    say(f"{session.device!r}; {len(session.launches)} launches, graph {'on' if options.graph else 'off'}, "
        f"PDL {'on' if options.pdl else 'off'}")
    step = session.step_function(options.graph)
    for _ in range(options.steps):
        step()
    session.stream.synchronize()
    step_us = driver.time_us(session.stream, step, repeats=options.repeats)
    times = [driver.time_us(session.stream, launch.enqueue, repeats=options.repeats) for launch in session.launches]
    width = max((len(launch.name) for launch in plan.launches), default=6)
    say(f"{'launch':<{width}}  {'grid':>12}  cluster  {'us':>8}  share")
    total = sum(times) or 1.0
    for launch, us in zip(plan.launches, times):
        grid = "x".join(map(str, launch.shape.grid))
        cluster = "x".join(map(str, launch.shape.cluster))
        say(f"{launch.name:<{width}}  {grid:>12}  {cluster:>7}  {us:8.2f}  {100 * us / total:4.1f}%")
    say(f"{options.steps} steps run; step {step_us:.2f} us (median of {options.repeats}); launches alone "
        f"sum to {sum(times):.2f} us")
    if session.collectives:
        def reduce_all() -> None:
            for collective in session.collectives:
                collective.enqueue()

        reduces = driver.Graph.capture(session.stream, reduce_all)
        alone = driver.time_us(session.stream, lambda: reduces.replay(session.stream), repeats=options.repeats)
        reduces.destroy()
        say(f"all-reduces alone: {alone:.2f} us for {len(session.collectives)} over {plan.ranks} ranks (a graph of "
            f"them); {100 * alone / step_us:.1f}% of the step")
    return 0


def profile(plan: Plan, env, sources, options: Options, say: Callable[[str], None]) -> int:
    """Each launch timed in an eager replay beside the graph's step, with its bytes and share of
    the copy bandwidth, grouped by layer kind and kernel (lanec/runtime/profile.py); --trace
    writes the step as a Chrome / Perfetto trace."""
    from lanec.runtime import profile as profiling

    session = Session(plan, env, sources, pdl=options.pdl, seed=seeded_on_gpu(plan, options))
    say(f"{session.device!r}; {len(session.launches)} launches, PDL {'on' if options.pdl else 'off'}")
    copy_bw = driver.copy_bandwidth(session.stream)
    step = session.step_function(graph=True)
    for _ in range(options.steps):
        step()
    session.stream.synchronize()
    step_us = driver.time_us(session.stream, step, repeats=options.repeats)
    times = driver.time_each_us(session.stream, session.launches, repeats=options.repeats)
    for line in profiling.tables(plan, times, step_us, copy_bw):
        say(line)
    if options.trace is not None:
        profiling.write_trace(options.trace, plan, times, copy_bw)
        say(f"wrote the step's trace to {options.trace} (chrome://tracing or ui.perfetto.dev)")
    return 0


def interpret(program, env, options: Options, say: Callable[[str], None]) -> int:
    """The plan's program on the CPU: N decode steps, the states carried from step to step and
    each request's positions moved on by its tokens (validated again before each step)."""
    started = time.perf_counter()
    for step in range(options.steps):
        if step and "positions" in env.inputs:
            env.inputs["positions"] = env.inputs["positions"] + np.int32(program.tokens)
            validate_inputs(program, env.inputs)
        outputs = program.run(env)
    elapsed = (time.perf_counter() - started) / options.steps
    for index, value in enumerate(outputs):
        value = np.asarray(value)
        summary = (f"mean |x| {float(np.abs(value).mean()):.4g}" if value.dtype.kind == "f" and value.size
                   else f"first {value.reshape(-1)[:8].tolist()}")
        say(f"output {index}: {value.dtype} {list(value.shape)}  {summary}")
    say(f"interpreted {options.steps} steps on the CPU: {elapsed * 1e3:.1f} ms a step")
    return 0


def execute(path: str | Path, options: Options, say: Callable[[str], None] = print) -> int:
    """What `lanec run` and `python -m lanec.runtime` do; returns the exit status."""
    if options.steps < 1 or options.repeats < 1:
        raise RunError(f"--steps {options.steps}, --repeats {options.repeats}: both must be at least 1")
    if options.context is not None and options.context < 1:
        raise RunError(f"--context {options.context}: a context holds at least one position")
    if options.check and options.interpret:
        raise RunError("--check compares the GPU with the interpreter; --interpret runs the interpreter alone: "
                       "choose one")
    profiling = options.profile or options.trace is not None
    if profiling and (options.check or options.interpret):
        raise RunError("--profile / --trace time the plan on the GPU; --check and --interpret do not: choose one")
    if options.outputs is not None and not options.check:
        raise RunError("--outputs saves the outputs of --check's step: add --check")
    check_serving(options)
    from lanec.runtime import parallel

    status = parallel.execute(path, options, say)  # a plan for several ranks: one process a GPU
    if status is not None:
        return status
    plan, program, env, sources = load(path, options)
    if options.interpret:
        return interpret(program, env, options, say)
    if options.check:
        return check(plan, program, env, sources, options, say)
    if options.serve is not None:
        from lanec.runtime.serve import serve

        return serve(plan, program, env, sources, options, say)
    if profiling:
        return profile(plan, env, sources, options, say)
    return bench(plan, env, sources, options, say)


def check_serving(options: Options) -> None:
    """`--serve N [--check-every K] [--churn P]`: counts of at least one, the pacing options only
    with --serve, and --serve alone among the modes (it makes its own inputs: no --context)."""
    for flag, value in (("--serve", options.serve), ("--check-every", options.check_every),
                        ("--churn", options.churn)):
        if value is not None and value < 1:
            raise RunError(f"{flag} {value}: at least 1")
    if options.serve is None:
        if options.check_every is not None or options.churn is not None:
            raise RunError("--check-every and --churn pace --serve's steps: add --serve N")
        return
    others = [flag for flag, given in (("--check", options.check), ("--interpret", options.interpret),
                                       ("--profile", options.profile or options.trace is not None),
                                       ("--context", options.context is not None)) if given]
    if others:
        raise RunError(f"--serve runs its own schedule of steps; {others[0]} is another mode: choose one "
                       "(--check-every K checks served steps)")


def parse(argv: list[str], prog: str) -> tuple[Path, Options]:
    """The command line of `lanec run` and `python -m lanec.runtime` (argparse: the GPU machine
    has no click)."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description="Run a lanec plan: time decode steps on the GPU, "
                                     "--check one step against the interpreter, --serve N steps as a server "
                                     "drives them, or --interpret it on the CPU.")
    parser.add_argument("plan", type=Path, help="plan.bin written by `lanec compile`")
    parser.add_argument("--steps", type=int, default=Options.steps, help="decode steps to run (default %(default)s)")
    parser.add_argument("--check", action="store_true", help="one step on the GPU against the interpreter")
    parser.add_argument("--interpret", action="store_true", help="run the plan's program on the CPU (no GPU)")
    parser.add_argument("--no-graph", dest="graph", action="store_false", help="launch eagerly, no CUDA graph")
    parser.add_argument("--no-pdl", dest="pdl", action="store_false", help="launch without PDL")
    parser.add_argument("--seed", type=int, default=Options.seed, help="seed of the random inputs and weights")
    parser.add_argument("--weights", type=Path, default=None,
                        help="a safetensors file, a sharded checkpoint (folder or index) or a GGUF file: the weights")
    parser.add_argument("--repeats", type=int, default=Options.repeats, help="timed repetitions (median)")
    parser.add_argument("--profile", action="store_true",
                        help="each launch's time, bytes and share of the copy bandwidth, by layer kind and kernel")
    parser.add_argument("--trace", type=Path, default=None, help="write the step as a Chrome / Perfetto trace")
    parser.add_argument("--gpu-seeding", action="store_true", default=Options.gpu_seeding,
                        help="make seeded weights on the GPU with the plan's seeders (the host keeps them lazy; "
                             "the default)")
    parser.add_argument("--host-seeding", dest="gpu_seeding", action="store_false",
                        help="make seeded weights on the host and upload them")
    parser.add_argument("--context", type=int, default=None,
                        help="serve a full batch at this context: every request active, its rows the context's last")
    parser.add_argument("--tp", type=int, default=None,
                        help="GPUs to run on, one rank each: the plan's count (`lanec compile --tp N`; the default)")
    parser.add_argument("--outputs", type=Path, default=None,
                        help="with --check, save the GPU's outputs (rank 0's) to this .npz")
    parser.add_argument("--serve", type=int, default=None, metavar="N",
                        help="serve N consecutive steps, states and caches carried, requests joining and leaving")
    parser.add_argument("--check-every", type=int, default=None, metavar="K",
                        help="with --serve, check every K-th step (and the last) against the interpreter")
    parser.add_argument("--churn", type=int, default=None, metavar="P",
                        help="with --serve, every P steps a request leaves and a new one joins at position 0")
    args = parser.parse_args(argv)
    return args.plan, Options(steps=args.steps, check=args.check, interpret=args.interpret, graph=args.graph,
                              pdl=args.pdl, seed=args.seed, weights=args.weights, repeats=args.repeats,
                              profile=args.profile, trace=args.trace, gpu_seeding=args.gpu_seeding,
                              context=args.context, tp=args.tp, outputs=args.outputs, serve=args.serve,
                              check_every=args.check_every, churn=args.churn)
