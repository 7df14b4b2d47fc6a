"""Greedy decoding on the GPU through a plan's decode step (`lanec generate`): one request, one
token a step. The plan's buffers are made once (weights bound as `lanec run --weights` binds
them); the page table (request 0 holds pages 0, 1, ...), the slot table (slot 1) and the zero
states are uploaded once and the caches and states stay on the GPU from step to step; each step
uploads its token and position, replays the step, and reads back the argmax. The prompt goes in
one token a step, then each chosen token goes back in (lanec/interp/generate.py does the same on
the interpreter, from the same `prepare`).

The GPU is reached through `runner.Session` (looked up when a decode starts, so a test can stand
a CPU session in for it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lanec.runtime import runner
from lanec.runtime.plan import Plan, PlanError
from lanec.runtime.runner import RunError


@dataclass
class Decoded:
    tokens: list[int]  # the new tokens chosen (the prompt left out)
    first_s: float  # from the first step to the first new token (the prompt read)
    total_s: float  # from the first step to the last new token

    def rate(self) -> float:
        """New tokens a second after the first (all of them over the whole time when there is one)."""
        if len(self.tokens) > 1 and self.total_s > self.first_s:
            return (len(self.tokens) - 1) / (self.total_s - self.first_s)
        return len(self.tokens) / self.total_s if self.total_s > 0 else float("inf")


def chosen_buffer(plan: Plan, program) -> str:
    """The output buffer holding the step's chosen tokens (the program's first output)."""
    for spec in plan.buffers:
        if spec.role == "output" and spec.source == 0:
            return spec.name
    raise PlanError("the plan has no output buffer of the step's chosen tokens (the program's output 0)")


def generate(plan: Plan, program, sources: dict[str, np.ndarray], prompt: list[int], new: int, *,
             graph: bool = True, pdl: bool = True, on_token: Callable[[int], None] | None = None,
             on_ready: Callable[[], None] | None = None, clock: Callable[[], float] = time.perf_counter) -> Decoded:
    """Greedy decoding of `new` tokens after `prompt` on the GPU; `on_ready` is called once the
    session holds the plan, `on_token` with each new token as it comes."""
    from lanec.interp.environment import Environment
    from lanec.interp.generate import prepare, step_inputs, vocabulary

    inputs, states = prepare(program, prompt, new)
    runner.validate_inputs(program, inputs)
    vocab = vocabulary(program)
    tokens_buffer = chosen_buffer(plan, program)
    session = runner.Session(plan, Environment(inputs, sources, states), sources, pdl=pdl)
    step = session.step_function(graph)
    session.stream.synchronize()
    if on_ready is not None:
        on_ready()

    fed, chosen = list(prompt), []
    started = clock()
    first = started
    for position in range(len(prompt) + new - 1):
        session.write(step_inputs(fed[position], position))
        step()
        if position < len(prompt) - 1:
            continue  # a prompt token read: its choice is not ours to keep
        token = int(np.asarray(session.read(tokens_buffer)).reshape(-1)[0])
        if vocab is not None and not 0 <= token < vocab:
            raise RunError(f"step {position} chose token {token}, outside the vocabulary (0..{vocab - 1}): "
                           "the plan's argmax wrote no token")
        chosen.append(token)
        fed.append(token)
        if len(chosen) == 1:
            first = clock()
        if on_token is not None:
            on_token(token)
    return Decoded(chosen, first - started, clock() - started)
