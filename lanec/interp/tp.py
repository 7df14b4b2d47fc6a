"""Tensor parallel on the interpreter: the N rank programs of a sharded step (`lanec/passes/shard.py`)
run in lockstep, each `all_reduce` summing its operand over the ranks (in rank order, fp32), as
NCCL's would on N GPUs. numpy only, like the rest of the interpreter.

A rank's weights and states are named slices of the whole model's: a declaration's `shard`
(`Shard.text`) says which, and `rank_environment` cuts them from the unsharded environment.

    programs = [program_of(shard(module, n, r)) for r in range(n)]
    outputs = run_ranks(programs, [rank_environment(env, p) for p in programs])  # rank 0's outputs
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from lanec.interp import ops
from lanec.interp.environment import Environment
from lanec.interp.ops import fail
from lanec.interp.program import Program

SHARD = re.compile(r"dim (\d+) part (\d+) of (\d+)(?: in (\d+(?:\+\d+)*))?")


@dataclass(frozen=True)
class Shard:
    """Part `part` of `parts` along dimension `dim` of a checkpoint tensor or a state. With
    `segments` (widths summing to the dimension) each segment is cut alike and the rank's parts
    are kept in order: a conv state's q, k and v channels."""

    dim: int
    part: int
    parts: int
    segments: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        text = f"dim {self.dim} part {self.part} of {self.parts}"
        return text + (" in " + "+".join(map(str, self.segments)) if self.segments else "")

    @staticmethod
    def parse(text: str) -> Shard:
        match = SHARD.fullmatch(text)
        if match is None:
            fail(f"shard '{text}': expected 'dim D part P of N' (optionally 'in A+B+...')")
        dim, part, parts = (int(g) for g in match.groups()[:3])
        segments = tuple(int(w) for w in match.group(4).split("+")) if match.group(4) else ()
        if not 0 <= part < parts:
            fail(f"shard '{text}': part {part} is not one of the {parts} parts")
        return Shard(dim, part, parts, segments)

    @staticmethod
    def of_rank(dim: int, parts: int, rank: int, ranks: int, segments: tuple[int, ...] = ()) -> Shard:
        """Rank `rank`'s part of `parts` (of `ranks` ranks): where there are fewer parts than ranks
        (kv heads fewer than the ranks), consecutive ranks share a part. The one rule the shard
        pass and the runtime (a plan carries rank 0's step, `lanec/runtime/parallel.py`) share."""
        return Shard(dim, rank * parts // ranks, parts, segments)

    def for_rank(self, rank: int, ranks: int) -> Shard:
        """This cut as rank `rank` of `ranks` holds it."""
        return Shard.of_rank(self.dim, self.parts, rank, ranks, self.segments)

    def whole(self, dims: tuple[int, ...] | list[int]) -> list[int]:
        """The shape of the whole tensor whose part has shape `dims` (the inverse of `cut`)."""
        dims = list(dims)
        dims[self.dim] = sum(self.segments) if self.segments else dims[self.dim] * self.parts
        return dims

    def cut(self, dims: tuple[int, ...] | list[int], what: str) -> list[int]:
        """The shape of the part of a tensor of shape `dims`."""
        dims = list(dims)
        if self.dim >= len(dims):
            fail(f"{what}: shard dimension {self.dim} of a tensor of rank {len(dims)}")
        segments = self.segments or (dims[self.dim],)
        if sum(segments) != dims[self.dim] or any(w % self.parts for w in segments):
            fail(f"{what}: dimension {self.dim} of {dims[self.dim]} (in {'+'.join(map(str, segments))}) "
                 f"does not divide into {self.parts} parts")
        dims[self.dim] //= self.parts
        return dims

    def slice(self, array: np.ndarray, what: str) -> np.ndarray:
        """The rank's part of `array` (a copy)."""
        self.cut(array.shape, what)
        pieces, start = [], 0
        for width in self.segments or (array.shape[self.dim],):
            size = width // self.parts
            index = [slice(None)] * array.ndim
            index[self.dim] = slice(start + self.part * size, start + (self.part + 1) * size)
            pieces.append(array[tuple(index)])
            start += width
        return np.concatenate(pieces, axis=self.dim)


def sliced(array: np.ndarray, shard: str, what: str) -> np.ndarray:
    return array.copy() if not shard else Shard.parse(shard).slice(array, what)


def rank_environment(env: Environment, program: Program) -> Environment:
    """A rank's environment: the inputs as they are, each weight and state its declared slice of
    the unsharded environment's (fresh copies of inputs and states)."""
    weights = {w.name: sliced(env.weights[w.name], w.shard, f"weight '{w.name}'") for w in program.weights}
    states = {s.name: sliced(env.states[s.name], s.shard, f"state '{s.name}'") for s in program.states}
    return Environment({k: v.copy() for k, v in env.inputs.items()}, weights, states)


def run_ranks(programs: list[Program], envs: list[Environment], storage: bool = False,
              values: list[dict[int, np.ndarray]] | None = None,
              routing: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """Run the rank programs step by step together; an `all_reduce` gives every rank the sum of
    its operand over the ranks (rounded to bf16 where it is stored so, under `storage`, as
    NCCL's bf16 sum is). Returns rank 0's outputs (every rank's outputs are the same replicated
    values); each env's states are updated in place. `values`, where given, receives each rank's
    values by id; `routing` is `Program.run`'s (the router is replicated: one for every rank)."""
    if not programs or len(programs) != len(envs):
        fail(f"{len(programs)} rank programs and {len(envs)} environments: one environment a rank")
    shapes = {tuple(step.op for step in p.steps) for p in programs}
    if len(shapes) != 1:
        fail("the rank programs disagree on their steps: shard one step for every rank")
    bound = [p.bind(env, None if values is None else values[r], routing)
             for r, (p, env) in enumerate(zip(programs, envs, strict=True))]
    for index, steps in enumerate(zip(*(p.steps for p in programs), strict=True)):
        if steps[0].op == "all_reduce":
            if steps[0].properties["ranks"] != len(programs):
                fail(f"step {index}: an all_reduce over {steps[0].properties['ranks']} ranks; "
                     f"{len(programs)} rank programs run")
            total = ops.all_reduce([v[s.operands["x"]] for v, s in zip(bound, steps, strict=True)])
            for program, v, s in zip(programs, bound, steps, strict=True):
                program.store(index, s, [total.copy()], v, storage)
            continue
        for program, v, step in zip(programs, bound, steps, strict=True):
            program.store(index, step, program.run_step(step, v), v, storage)
    return programs[0].collect(bound[0])
