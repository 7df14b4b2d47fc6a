"""What a program runs on: its inputs by role, weights by name, states by name (numpy only).

`random_environment` makes fresh values, never zeros, in the ranges a real decode step sees:
weights scaled by their fan-in so activations stay bounded through many layers, norm weights near
one, A_log and dt_bias as Kimi Linear / fla initialise them, token ids inside the vocabulary,
consecutive positions within a request, slot tables with padding requests and speculative
accepted counts, distinct pages enough for every position. Values are exactly representable in
their declared dtype (a bf16 weight holds bf16 values), so a kernel and the interpreter read the
same numbers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from lanec.interp.ops import F32, fail
from lanec.interp.program import Program
from lanec.runtime.dtypes import representable

SLOT_STATES = ("conv", "recurrent")
CACHE_STATES = ("kv", "latent")


@dataclass
class Environment:
    inputs: dict[str, np.ndarray]
    weights: dict[str, np.ndarray]
    states: dict[str, np.ndarray]

    def copy(self) -> Environment:
        """Fresh copies of the inputs and states (weights are shared: nothing writes them)."""
        return Environment(
            {k: v.copy() for k, v in self.inputs.items()},
            dict(self.weights),
            {k: v.copy() for k, v in self.states.items()},
        )


def uses_of(program: Program) -> dict[int, list[tuple[str, str]]]:
    """value id -> the (op, operand keyword) pairs that read it."""
    uses: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for step in program.steps:
        for name, ids in step.operands.items():
            for value in ids if isinstance(ids, list) else [ids]:
                uses[value].append((step.op, name))
    return uses


NORM_WEIGHTS = {("norm", "w"), ("norm_gated", "w"), ("kda", "norm_weight"), ("head_norm", "w")}
A_LOGS = {("kda_gate", "a_log"), ("kda", "a_log")}
DT_BIASES = {("kda_gate", "dt_bias"), ("kda", "dt_bias")}
BIASES = {("conv", "bias"), ("kda", "biases"), ("mixture", "correction")}


def initialiser(uses: set[tuple[str, str]], shape: tuple[int, ...] | list[int]) -> tuple[float, float]:
    """(center, scale) of a weight's seeded values, by the ops that read it: norm weights near one,
    A_log around log 4 (fla draws A in [1, 16]), dt_bias around softplus^-1(0.01) (fla's dt in
    [1e-3, 1e-1]), biases small, embedding rows of unit scale, product rows scaled by their
    fan-in. The plan writer records the same for the runtime's seeded weights."""
    if uses & NORM_WEIGHTS:
        return 1.0, 0.1
    if uses & A_LOGS:
        return float(np.log(4.0)), 0.5
    if uses & DT_BIASES:
        return -4.6, 0.5
    if uses & BIASES:
        return 0.0, 0.1
    if ("embed", "table") in uses or len(shape) < 2:
        return 0.0, 1.0
    return 0.0, 1.0 / float(np.sqrt(shape[-1]))


def weight_values(rng: np.random.Generator, shape: list[int], uses: list[tuple[str, str]]) -> np.ndarray:
    """`center + scale * clip(normal, -3, 3)`: bounded, of the scale the runtime's seeded weights
    have (`lanec.runtime.seeded`: uniform, standard deviation `scale`)."""
    center, scale = initialiser(set(uses), shape)
    values = rng.standard_normal(shape, dtype=F32)
    np.clip(values, -3, 3, out=values)
    values *= F32(scale)
    values += F32(center)
    return values


def state_values(rng: np.random.Generator, kind: str, shape: list[int]) -> np.ndarray:
    scale = 0.1 if kind == "recurrent" else 1.0  # conv taps and caches hold activations
    values = rng.standard_normal(shape, dtype=F32)
    values *= F32(scale)
    return values


def random_environment(program: Program, seed: int, padding: float = 0.25,
                       weights: dict[str, np.ndarray] | None = None, steps: int = 1) -> Environment:
    """Fresh random inputs, weights and states for `program` (see the module's docstring);
    each request is padding with probability `padding` (at least one stays active). `weights`,
    where given (a plan's sources), are taken as they are instead of drawn. The positions leave
    room in the pages for `steps` decode steps, each moving a request on by its tokens."""
    if not 0 <= padding < 1:
        fail(f"padding probability {padding}: between 0 and 1 (at least one request stays active)")
    rng = np.random.default_rng(seed)
    uses = uses_of(program)
    if weights is None:
        weights = {w.name: representable(weight_values(rng, w.shape, uses[w.value]), w.dtype)
                   for w in program.weights}
    else:
        weights = {w.name: weights[w.name] for w in program.weights}
    states = {s.name: representable(state_values(rng, s.kind, s.shape), s.dtype) for s in program.states}
    inputs: dict[str, np.ndarray] = {}
    shapes = {i.role: i.shape for i in program.inputs}
    batch, tokens = program.batch, program.tokens

    slot_capacity = min((s.shape[0] for s in program.states if s.kind in SLOT_STATES), default=None)
    if "slots" in shapes or "accepted" in shapes:
        active = rng.random(batch) >= padding
        if not active.any():
            active[rng.integers(batch)] = True
        accepted = rng.integers(1, tokens + 1, batch) if tokens > 1 else np.ones(batch, np.int64)
        if "slots" in shapes:
            inputs["slots"] = slot_table(rng, shapes["slots"], tokens, active, accepted, slot_capacity,
                                         padding)
        if "accepted" in shapes:
            inputs["accepted"] = accepted.astype(np.int32)

    caches = [s for s in program.states if s.kind in CACHE_STATES]
    reach = 4096  # positions a rope-only step may see
    if "pages" in shapes:
        columns = shapes["pages"][1]
        page_size = min((s.shape[1] for s in caches), default=16)
        cache_pages = min((s.shape[0] for s in caches), default=batch * columns)
        per = min(columns, cache_pages // batch)
        reach = per * page_size
        if reach < steps * tokens:
            fail(f"the caches' {cache_pages} pages of {page_size} cannot hold {batch} requests of {tokens} "
                 "tokens" + (f" for {steps} steps" if steps > 1 else ""))
        order = rng.permutation(cache_pages)
        pages = np.full((batch, columns), -1, np.int64)
        pages[:, :per] = order[: batch * per].reshape(batch, per)
        inputs["pages"] = pages.astype(np.int32)
    if "positions" in shapes:
        start = rng.integers(0, reach - steps * tokens + 1, batch)
        inputs["positions"] = (start[:, None] + np.arange(tokens)).reshape(-1).astype(np.int32)
    if "tokens" in shapes:
        tables = [w for w in program.weights if (("embed", "table") in uses[w.value])]
        vocab = min((w.shape[0] for w in tables), default=32)
        inputs["tokens"] = rng.integers(0, vocab, shapes["tokens"]).astype(np.int32)
    return Environment(inputs, weights, states)


def slot_table(rng: np.random.Generator, shape: list[int], tokens: int, active: np.ndarray,
               accepted: np.ndarray, capacity: int | None, padding: float) -> np.ndarray:
    """Distinct positive slots for what active requests read and write; padding requests read a
    slot <= 0 (-1 or 0). In a speculative step an active request's slots[b, 0] and
    slots[b, accepted - 1] are positive, its other tokens' slots positive or (with probability
    `padding`) -1; a padding request's slots[b, 0] may hold a slot that must not be written."""
    batch = shape[0]
    width = shape[1] if len(shape) == 2 else 1
    needed = batch * tokens
    capacity = needed + 1 if capacity is None else capacity
    if capacity - 1 < needed:
        fail(f"the states hold {capacity} slots (0 is padding); {batch} requests of {tokens} tokens "
             f"need {needed}")
    fresh = iter(rng.permutation(np.arange(1, capacity))[:needed])
    table = np.full((batch, width), -1, np.int64)
    for b in range(batch):
        read = int(accepted[b]) - 1
        if not active[b]:
            table[b, read] = rng.choice([-1, 0])
            if tokens > 1 and read > 0 and rng.random() < 0.5:
                table[b, 0] = next(fresh)
            continue
        for t in range(tokens):
            if t in (0, read) or rng.random() >= padding:
                table[b, t] = next(fresh)
    return table.reshape(shape).astype(np.int32)
