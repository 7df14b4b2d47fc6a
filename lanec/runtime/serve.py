"""`lanec run plan.bin --serve N [--churn P] [--check-every K]`: a plan held under load.

N consecutive decode steps on the GPU as a server drives them. The states and caches stay on the
device from step to step; the host keeps the batch's schedule (`Schedule`) and, before each step,
writes its inputs into the step's input buffers in place, so the captured graph replays them:

- each request's rows move on by the tokens it took: one a step, or in a speculative step its
  accepted count (vLLM's semantics: it continues from the state after its `accepted`-th token, so
  its next rows start that many positions on);
- a request takes a page from the cache's pool when its rows enter a new page column, and
  finishes (leaves, and a new request takes its row) when its next rows would pass what its share
  of the cache holds (min(the page table's columns, cache pages / batch) pages);
- with `--churn P`, every P steps one request leaves (its slots and pages back to the pools, its
  slot table entries padding) and a new request joins at position 0 in a free slot with fresh
  pages, its state slots zeroed on the device first. With a slot table and more than one request
  a row, the batch keeps one padding row: the joining request takes it, the leaving one's row
  becomes it. A padding row of a plan with a page table still writes its attention's cache rows
  (the attention has no padding), so it holds a page of its own at positions 0 ..;
- the first step's requests are mid-flight (the seeded states are theirs), at positions drawn in
  the first half of their share; the next step's tokens are the step's chosen ones (greedy
  decoding), a joining request's first token drawn from the vocabulary.

The slot table, page table and positions of every step pass the runner's validators before they
are uploaded. Every K-th step (and the last) is checked for drift: the GPU's states and caches are
read as they are before it, the interpreter runs that one step from exactly those values beside
the GPU, and the judge of `--check` compares every output and state; so each check measures one
step's error, never host-against-GPU divergence accumulated over the run. The run reports each
check on one line, the buffer nearest its tolerance over the run, steps/s (the schedule, uploads,
the step and the outputs' read-back; the checks not counted), and a digest: sha256 over every
step's outputs as stored and the final states, so two runs of the same plan, seed and options
must print the same digest (bitwise identical).

The 10,000-step run on the H200 (the first four layers of Kimi Linear at batch 8: KDA, MLA, the
mixtures; tests/gpu/plans.py's `kimi-b8`, built here by `python tests/gpu/plans.py kimi-b8`):

    python3 -m lanec.runtime build/plans/kimi-b8.plan --serve 10000 --churn 50 --check-every 2000

and twice the same command prints the same `digest` line.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lanec.runtime import runner
from lanec.runtime.runner import Comparison, RunError


@dataclass
class Request:
    """One row of the batch: a request (`ident` >= 0) or padding (-1, its slot table entries
    `blank`), the slots it owns (one a token of its step), the pages it holds (column by column),
    where its step's rows start, and its accepted count this step."""

    ident: int
    slots: list[int] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    start: int = 0
    accepted: int = 1
    blank: int = -1

    @property
    def padding(self) -> bool:
        return self.ident < 0


class Schedule:
    """The batch a server steps, on the host: which request each row holds, its slots, pages and
    positions, the pools of free slots and pages (first freed, first handed out again), and the
    next step's tokens. `inputs()` is the current step's; `advance(chosen)` moves to the next one,
    `fresh` naming the slots of requests that join there (to be zeroed before it runs)."""

    def __init__(self, program, seed: int, churn: int | None = None):
        self.shapes = {i.role: list(i.shape) for i in program.inputs}
        self.batch, self.tokens, self.churn = program.batch, program.tokens, churn
        self.rng = np.random.default_rng(seed)
        self.vocab = runner.vocabulary(program)
        self.step = 0
        self.fresh: list[int] = []
        self.joined = self.left = self.finished = self.reused = 0
        self._ids = itertools.count()
        self._ever_held: set[int] = set()
        self.free_slots: deque[int] = deque()
        if "slots" in self.shapes:
            capacity = runner.slot_capacity(program)
            self.free_slots.extend(int(s) for s in self.rng.permutation(np.arange(1, capacity)))
        self.page_size: int | None = None
        self.limit: int | None = None  # positions a request's share of the cache holds (None: no pages)
        self.free_pages: deque[int] = deque()
        if "pages" in self.shapes:
            cache_pages, self.page_size = runner.cache_geometry(program)
            share = min(self.shapes["pages"][1], cache_pages // self.batch)
            self.limit = share * self.page_size
            if self.limit < self.tokens:
                raise RunError(f"the caches' {cache_pages} pages of {self.page_size} rows give each of {self.batch} "
                               f"requests {self.limit} positions: less than one step of {self.tokens} tokens")
            self.free_pages.extend(int(p) for p in self.rng.permutation(cache_pages))
        self.padding = "slots" in self.shapes and self.batch > 1 and churn is not None
        self.next_tokens = self.rng.integers(0, self.vocab, self.batch * self.tokens).astype(np.int32)
        padded = int(self.rng.integers(self.batch)) if self.padding else -1
        self.rows: list[Request] = []
        for b in range(self.batch):
            if b == padded:
                self.rows.append(self._padding_row())
                continue
            top = (self.limit // 2 if self.limit is not None else 1024) - self.tokens
            request = Request(next(self._ids), self._take_slots(), start=int(self.rng.integers(0, max(top, 0) + 1)))
            self._grow(request)
            self.rows.append(request)

    # -- the pools ---------------------------------------------------------------------------

    def _take_slots(self) -> list[int]:
        if "slots" not in self.shapes:
            return []
        slots = [self.free_slots.popleft() for _ in range(self.tokens)]
        self.reused += sum(s in self._ever_held for s in slots)
        self._ever_held.update(slots)
        return slots

    def _grow(self, request: Request) -> None:
        """Pages for every column the request's rows reach."""
        if self.page_size is None:
            return
        needed = (request.start + self.tokens - 1) // self.page_size + 1
        while len(request.pages) < needed:
            request.pages.append(self.free_pages.popleft())

    def _release(self, b: int) -> None:
        request = self.rows[b]
        self.free_slots.extend(request.slots)
        self.free_pages.extend(request.pages)
        request.slots, request.pages = [], []

    def _padding_row(self) -> Request:
        row = Request(-1, blank=int(self.rng.choice([-1, 0])))
        self._grow(row)  # positions 0 .. tokens - 1 in a page of its own
        return row

    # -- requests joining and leaving --------------------------------------------------------

    def _join(self, b: int) -> None:
        """A new request in row `b` (its old holder released): position 0, fresh slots (zeroed
        before the step: `fresh`) and pages, its first token drawn."""
        self._release(b)
        request = Request(next(self._ids), self._take_slots())
        self._grow(request)
        self.rows[b] = request
        self.fresh += request.slots
        self.next_tokens[b * self.tokens:(b + 1) * self.tokens] = self.rng.integers(0, self.vocab, self.tokens)
        self.joined += 1

    def _leave(self, b: int, pad: bool) -> None:
        """Row `b`'s request leaves: its slots and pages back to the pools; `pad`: the row is padding
        until a request joins it."""
        self._release(b)
        self.left += 1
        if pad:
            self.rows[b] = self._padding_row()

    def advance(self, chosen: np.ndarray | None = None) -> None:
        """The next step: `chosen` (this step's chosen tokens, one a row) become its tokens (None:
        drawn); every request moves on; those past their share finish; with churn, one joins and
        one leaves."""
        self.step += 1
        self.fresh = []
        rows = self.batch * self.tokens
        if chosen is not None and np.size(chosen) == rows:
            chosen = np.asarray(chosen).reshape(-1)
            wrong = np.flatnonzero((chosen < 0) | (chosen >= self.vocab))
            if wrong.size:  # fed back, it would index past the embedding table
                raise RunError(f"step {self.step - 1} chose token {chosen[wrong[0]]} in row {wrong[0]}, outside the "
                               f"vocabulary (0..{self.vocab - 1}): the step's argmax wrote no token")
            self.next_tokens = chosen.astype(np.int32)
        else:
            self.next_tokens = self.rng.integers(0, self.vocab, rows).astype(np.int32)
        joined: set[int] = set()
        for b, request in enumerate(self.rows):
            if request.padding:
                continue
            if "accepted" in self.shapes:
                request.accepted = int(self.rng.integers(1, self.tokens + 1))
                request.start += request.accepted
            else:
                request.start += self.tokens
            if self.limit is not None and request.start + self.tokens > self.limit:
                self._leave(b, pad=False)
                self._join(b)
                self.finished += 1
                joined.add(b)
        if self.churn is not None and self.step % self.churn == 0:
            padded = [b for b, request in enumerate(self.rows) if request.padding]
            if padded:
                b = padded[int(self.rng.integers(len(padded)))]
                self._join(b)
                joined.add(b)
            active = [b for b, request in enumerate(self.rows) if not request.padding and b not in joined]
            if active:
                b = active[int(self.rng.integers(len(active)))]
                self._leave(b, pad=self.padding)
                if not self.padding:
                    self._join(b)
        for request in self.rows:
            self._grow(request)

    def inputs(self) -> dict[str, np.ndarray]:
        """The current step's inputs by role, in the shapes the program declares."""
        batch, tokens, shapes = self.batch, self.tokens, self.shapes
        inputs: dict[str, np.ndarray] = {}
        if "tokens" in shapes:
            inputs["tokens"] = self.next_tokens.reshape(shapes["tokens"]).astype(np.int32)
        if "positions" in shapes:
            starts = np.array([r.start for r in self.rows], np.int64)
            inputs["positions"] = (starts[:, None] + np.arange(tokens)).reshape(-1).astype(np.int32)
        if "slots" in shapes:
            width = shapes["slots"][1] if len(shapes["slots"]) == 2 else 1
            table = np.full((batch, width), -1, np.int64)
            for b, request in enumerate(self.rows):
                table[b, :tokens] = request.blank if request.padding else request.slots
            inputs["slots"] = table.reshape(shapes["slots"]).astype(np.int32)
        if "accepted" in shapes:
            inputs["accepted"] = np.array([r.accepted for r in self.rows], np.int32)
        if "pages" in shapes:
            table = np.full((batch, shapes["pages"][1]), -1, np.int64)
            for b, request in enumerate(self.rows):
                table[b, :len(request.pages)] = request.pages
            inputs["pages"] = table.astype(np.int32)
        return inputs


class Digest:
    """sha256 over arrays in the order they are added (each one's dtype, shape and bytes): two runs
    agree only where every array of each agrees bit for bit, in the same order."""

    def __init__(self):
        self._hash = hashlib.sha256()
        self.arrays = 0

    def add(self, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        self._hash.update(f"{array.dtype.str}{array.shape}".encode())
        self._hash.update(array.tobytes())
        self.arrays += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def used(row: Comparison) -> float:
    """How much of its tolerance a buffer's verdict used (1: at the bound; inf: a note, or any
    difference where the bound is exact)."""
    if row.note:
        return math.inf
    if row.tolerance.atol > 0:
        return row.error / row.tolerance.atol
    return 0.0 if row.error == 0 else math.inf


class Drift:
    """The run's drift checks: each judged as `--check` judges one step; the buffer that came
    nearest its tolerance over the run."""

    def __init__(self):
        self.checks = 0
        self.failed: list[int] = []
        self.worst: tuple[float, Comparison, int] | None = None

    def record(self, step: int, rows: list[Comparison], say: Callable[[str], None]) -> None:
        self.checks += 1
        nearest = max(rows, key=used)
        if self.worst is None or used(nearest) > self.worst[0]:
            self.worst = (used(nearest), nearest, step)
        bad = [r for r in rows if not r.ok]
        say(f"step {step}: {len(rows) - len(bad)} of {len(rows)} agree with the interpreter; nearest its "
            f"tolerance: {describe(nearest)}")
        if bad:  # the whole table where a buffer drifted
            self.failed.append(step)
            for line in runner.table(rows):
                say(line)

    def summary(self) -> str:
        if not self.checks:
            return "drift: not checked (--check-every K checks every K-th step)"
        share, row, step = self.worst
        verdict = f"{len(self.failed)} failed (steps {', '.join(map(str, self.failed))})" if self.failed \
            else "all agree"
        return f"drift: {self.checks} checks, {verdict}; worst {describe(row)} at step {step}"


def describe(row: Comparison) -> str:
    share = used(row)
    if row.note:
        return f"{row.name} ({row.note})"
    return (f"{row.name} {row.error:.2e} of scale ({'inf' if math.isinf(share) else f'{100 * share:.0f}%'} of "
            f"{row.tolerance})")


def drift(session, program, inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray],
          before: dict[str, np.ndarray]) -> list[Comparison]:
    """The step the GPU just ran, on the interpreter from the GPU's states as they were before it
    (`before`) and the same inputs, judged against the GPU's outputs and states after it."""
    from lanec.interp.environment import Environment

    reference = Environment({role: np.array(v) for role, v in inputs.items()}, weights, before)
    values: dict[int, np.ndarray] = {}
    outputs = program.run(reference, storage=True, values=values, routing=runner.gpu_routing(session, program))
    return runner.verdicts(session, program, outputs, reference.states, values)


def chosen_buffer(plan, program) -> str | None:
    """The output buffer of the step's chosen tokens (an argmax, one a row), fed back as the next
    step's tokens; None where the step chooses none."""
    chosen = {step.results[0] for step in program.steps if step.op == "argmax"}
    for spec in plan.buffers:
        if (spec.role == "output" and spec.source < len(program.outputs) and program.outputs[spec.source] in chosen
                and math.prod(spec.shape) == program.rows):
            return spec.name
    return None


def serve(plan, program, env, sources, options, say: Callable[[str], None]) -> int:
    """`--serve N`: N steps of the schedule on the GPU (see the module's docstring); 0 when every
    drift check agrees."""
    schedule = Schedule(program, options.seed, options.churn)
    session = runner.Session(plan, env, sources, pdl=options.pdl, seed=runner.seeded_on_gpu(plan, options))
    return serve_session(session, schedule, program, env.weights, options, say)


def serve_session(session, schedule: Schedule, program, weights: dict[str, np.ndarray], options,
                  say: Callable[[str], None]) -> int:
    """The serving loop on a session (the GPU's, or a stand-in that computes the step otherwise)."""
    plan = session.plan
    outputs = [spec.name for spec in plan.buffers if spec.role == "output"]
    states = [spec for spec in plan.buffers if spec.role == "state"]
    chosen_name = chosen_buffer(plan, program)
    say(f"{session.device!r}; serving {options.serve} steps of {schedule.batch} requests x {schedule.tokens} "
        f"tokens, graph {'on' if options.graph else 'off'}, PDL {'on' if options.pdl else 'off'}, "
        + (f"churn every {options.churn} steps" if options.churn else "no churn")
        + (f", a drift check every {options.check_every} steps" if options.check_every else ""))
    step = session.step_function(options.graph)
    digest, watch = Digest(), Drift()
    uploaded: dict[str, np.ndarray] = {}
    chosen = None
    aside = 0.0  # seconds of the drift checks, not counted in steps/s
    started = time.perf_counter()
    for index in range(options.serve):
        if index:
            schedule.advance(chosen)
        inputs = schedule.inputs()
        runner.validate_inputs(program, inputs)
        session.zero_slots(schedule.fresh)
        checking = options.check_every is not None and ((index + 1) % options.check_every == 0
                                                        or index + 1 == options.serve)
        if checking:
            paused = time.perf_counter()
            before = {spec.source: session.read(spec.name) for spec in states}
            aside += time.perf_counter() - paused
        changed = {role: v for role, v in inputs.items()
                   if role not in uploaded or not np.array_equal(uploaded[role], v)}
        session.write(changed)
        uploaded.update(changed)
        step()
        session.stream.synchronize()
        for name in outputs:
            stored = session.read_stored(name)
            digest.add(stored)
            if name == chosen_name:
                chosen = stored
        if checking:
            paused = time.perf_counter()
            watch.record(index + 1, drift(session, program, inputs, weights, before), say)
            aside += time.perf_counter() - paused
    served = time.perf_counter() - started - aside
    for spec in states:
        digest.add(session.read_stored(spec.name))
    say(f"served {options.serve} steps in {served:.2f} s: {options.serve / served:.1f} steps/s "
        f"({1e3 * served / options.serve:.3f} ms a step: schedule, uploads, the step, the outputs' read-back)")
    say(f"requests: {schedule.joined} joined, {schedule.left} left ({schedule.finished} at the end of their pages), "
        f"{schedule.reused} slots handed out again")
    say(watch.summary())
    say(f"digest {digest.hexdigest()} (sha256 of {options.serve} steps' outputs as stored, then the final states)")
    return 1 if watch.failed else 0
