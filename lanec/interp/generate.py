"""Greedy decoding on the interpreter: a program's decode step run again and again on one
Environment (numpy only).

One request (batch 1, one token a step): the prompt goes in one token a step, then each step's
own next token (the step's first output, its argmax) goes back in, until `new` tokens are
chosen. Positions advance one a step; the page table is the identity (request 0 holds pages
0, 1, ...), and a slotted state lives in slot 1 (slot 0 is padding). States start at zero and are
held in fp32: the interpreter's meaning, with nothing rounded to the form's storage types.

    program = program_of(module)
    run = generate(program, checkpoint_weights(program, "model.safetensors"), [1, 2, 3], new=16)
    run.tokens, run.logits   # the chosen tokens; every step's logits [steps, vocab]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lanec.interp.environment import CACHE_STATES, Environment
from lanec.interp.ops import F32, fail
from lanec.interp.program import Program

ROLES = ("tokens", "positions", "pages", "slots")  # the inputs a one-request decode loop feeds


@dataclass
class Generation:
    tokens: list[int]  # the `new` chosen tokens (the prompt left out)
    logits: np.ndarray  # [steps, vocab], step s the logits after reading token s of prompt + chosen


def checkpoint_weights(program: Program, path: str | Path) -> dict[str, np.ndarray]:
    """Every weight of the program from a safetensors or GGUF checkpoint, by its checkpoint name
    (the conventions `lanec run --weights` binds: stacked experts, row slices, reshapes), as fp32."""
    from lanec.runtime.weights import open_checkpoint

    checkpoint = open_checkpoint(path)
    return {w.name: checkpoint.resolve(w.name, tuple(w.shape), w.format == "q8_0").astype(F32)
            for w in program.weights}


def vocabulary(program: Program) -> int | None:
    """Rows of the embedding table the step's tokens index (None when no embed op reads them)."""
    tokens = {i.value for i in program.inputs if i.role == "tokens"}
    shapes = {w.value: w.shape for w in program.weights}
    for step in program.steps:
        if step.op == "embed" and step.operands.get("tokens") in tokens and step.operands.get("table") in shapes:
            return int(shapes[step.operands["table"]][0])
    return None


def prepare(program: Program, prompt: list[int], new: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The inputs (page table, slot table) and zero states of one request's greedy decode of `new`
    tokens after `prompt`, checked against what the step can do (tokens and positions are fed a step
    at a time: `step_inputs`). Shared by the interpreter's loop and the runtime's (`lanec generate`)."""
    if program.batch != 1 or program.tokens != 1:
        fail(f"generate runs one request a token a step (batch 1, tokens 1); the step is {program.batch} "
             f"requests of {program.tokens} tokens: import it with --batch 1 --spec-tokens 1")
    roles = {i.role: i for i in program.inputs}
    unfed = sorted(set(roles) - set(ROLES))
    if unfed:
        fail(f"generate feeds {', '.join(ROLES)}; the step also reads {', '.join(unfed)}")
    if len(program.outputs) < 2:
        fail("generate needs the step's logits (import it without --no-logits)")
    if not prompt or new < 1:
        fail(f"generate needs a prompt and at least one new token; got {len(prompt)} prompt tokens, {new} new")
    vocab = vocabulary(program)
    if vocab is not None:
        outside = [t for t in prompt if not 0 <= t < vocab]
        if outside:
            fail(f"prompt token {outside[0]} is outside the vocabulary (0..{vocab - 1})")
    steps = len(prompt) + new - 1
    caches = [s for s in program.states if s.kind in CACHE_STATES]
    cache_pages = min((s.shape[0] for s in caches), default=0)
    if "pages" in roles and caches:
        columns = roles["pages"].shape[1]
        reach = min(columns, cache_pages) * min(s.shape[1] for s in caches)
        if steps > reach:
            fail(f"{len(prompt)} prompt + {new} new tokens need {steps} positions; the caches hold {reach} "
                 "a request")

    inputs: dict[str, np.ndarray] = {}
    if "pages" in roles:
        pages = np.arange(roles["pages"].shape[1])
        inputs["pages"] = np.where(pages < cache_pages, pages, -1)[None, :].astype(np.int32)
    if "slots" in roles:
        inputs["slots"] = np.ones(roles["slots"].shape, np.int32)
    inputs.update(step_inputs(prompt[0], 0))
    states = {s.name: np.zeros(s.shape, F32) for s in program.states}
    return inputs, states


def step_inputs(token: int, position: int) -> dict[str, np.ndarray]:
    """What changes from step to step: the token read and its position."""
    return {"tokens": np.array([token], np.int32), "positions": np.array([position], np.int32)}


def generate(program: Program, weights: dict[str, np.ndarray], prompt: list[int], new: int,
             on_token: Callable[[int], None] | None = None) -> Generation:
    """Greedy decoding of `new` tokens after `prompt` (see the module's docstring); `on_token` is
    told each chosen token as it comes."""
    inputs, states = prepare(program, prompt, new)
    env = Environment(inputs, weights, states)

    fed, chosen, logits = list(prompt), [], []
    for position in range(len(prompt) + new - 1):
        env.inputs.update(step_inputs(fed[position], position))
        next_tokens, step_logits = program.run(env)[:2]
        logits.append(np.asarray(step_logits, F32)[0])
        if position >= len(prompt) - 1:
            chosen.append(int(next_tokens[0]))
            fed.append(chosen[-1])
            if on_token is not None:
                on_token(chosen[-1])
    return Generation(chosen, np.stack(logits))
