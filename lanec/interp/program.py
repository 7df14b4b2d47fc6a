"""A decode step as plain data: the interpreter's program.

A `Program` is what `lanec/interp/lower.py` makes of a `form` module, written so that it is
JSON-serialisable and runs with numpy alone (the GPU machine has no xDSL): declarations (batch,
tokens; inputs by role, weights by name and format, states by name and kind, each with shape and
dtype), then steps, each an op of `ops.py` with its operands (keyword -> value id, or a list of
ids for a variadic operand), its result ids and its properties (plain JSON). Values are numbered.

    program = Program.from_json(text)
    outputs = program.run(env)   # env.states are updated in place

q8_0 weights are dequantized here (the environment holds the checkpoint's source values); a
producer with a `quantize` property returns the values its int8 words stand for.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from lanec.interp import ops
from lanec.interp.lazy import LazyWeight
from lanec.interp.ops import InterpretError, fail
from lanec.runtime.dtypes import round_bf16

if TYPE_CHECKING:
    from lanec.interp.environment import Environment

# step op -> its meaning; each takes its operands and properties as keywords
OPS = {
    "embed": ops.embed,
    "product": ops.product,
    "gated_product": ops.gated_product,
    "part": ops.part,
    "norm": ops.rmsnorm,
    "add": ops.add,
    "mul": ops.mul,
    "swiglu": ops.swiglu,
    "silu": ops.silu,
    "sigmoid": ops.sigmoid,
    "l2norm": ops.l2norm,
    "head_norm": ops.head_norm,
    "rope": ops.rope,
    "conv": ops.conv,
    "kda_gate": ops.kda_gate,
    "delta_rule": ops.delta_rule,
    "norm_gated": ops.norm_gated,
    "kda": ops.kda,
    "attention": ops.attention,
    "latent_attention": ops.latent_attention,
    "mixture": ops.mixture,
    "quantize": ops.quantize,
    "argmax": ops.argmax,
    "all_reduce": ops.all_reduce,  # over the ranks: lanec/interp/tp.py runs it
}

# ops whose meaning depends on the step's tokens a request
TOKEN_OPS = frozenset({"conv", "delta_rule", "kda", "attention", "latent_attention"})

PART = ("heads", "unit", "offset", "length")

Operand = int | list[int]


@dataclass
class Input:
    value: int
    role: str
    shape: list[int]
    dtype: str


@dataclass
class Weight:
    value: int
    name: str
    format: str
    shape: list[int]
    dtype: str
    shard: str = ""  # the rank's slice of the checkpoint tensor (tp.Shard), "" for all of it


@dataclass
class State:
    value: int
    name: str
    kind: str
    shape: list[int]
    dtype: str
    shard: str = ""  # the rank's slice of the unsharded state (tp.Shard), "" for all of it


@dataclass
class Step:
    op: str
    operands: dict[str, Operand]
    results: list[int]
    properties: dict[str, Any] = field(default_factory=dict)
    stores: list[str] = field(default_factory=list)  # each result's storage dtype ("bf16", "f32", ...)


@dataclass
class Program:
    batch: int
    tokens: int
    inputs: list[Input]
    weights: list[Weight]
    states: list[State]
    steps: list[Step]
    outputs: list[int]

    @property
    def rows(self) -> int:
        return self.batch * self.tokens

    # -- running ------------------------------------------------------------------------------

    def run(self, env: Environment, storage: bool = False, values: dict[int, np.ndarray] | None = None,
            routing: dict | None = None) -> list[np.ndarray]:
        """The step's outputs; `env.states` are updated in place. With `storage`, every result
        stored as bf16 is rounded to bf16 as a kernel stores it (the meaning stays fp32 math
        between stores: the oracle for `lanec run --check`). `values`, if given, receives every
        value of the step by id. `routing` (router weight name -> expert ids [rows, top_k], or an
        `ops.Hint` naming its margin): a mixture takes a row's given experts where they are a
        near-tie of its own choice (`ops.mixture`'s `hint`), so a check follows the GPU's routing
        through near ties."""
        values = self.bind(env, values, routing)
        for index, step in enumerate(self.steps):
            self.store(index, step, self.run_step(step, values), values, storage)
        return self.collect(values)

    def bind(self, env: Environment, values: dict[int, np.ndarray] | None = None,
             routing: dict | None = None) -> dict[int, np.ndarray]:
        """The step's declarations bound to `env`'s arrays (q8_0 weights dequantized), by value id."""
        values = {} if values is None else values
        self._routing = {decl.value: routing[decl.name] for decl in self.weights if decl.name in (routing or {})}
        for decl in self.inputs:
            values[decl.value] = declared(env.inputs, decl.role, decl, "input")
        for decl in self.weights:
            source = declared(env.weights, decl.name, decl, "weight")
            if isinstance(source, LazyWeight):  # kept lazy: an op that reads some rows makes only those
                values[decl.value] = source.map(ops.q8_0) if decl.format == "q8_0" else source
                continue
            source = ops.f32(source)
            values[decl.value] = ops.q8_0(source) if decl.format == "q8_0" else source
        for decl in self.states:
            values[decl.value] = declared(env.states, decl.name, decl, "state")
        return values

    def store(self, index: int, step: Step, results: list[np.ndarray], values: dict[int, np.ndarray],
              storage: bool) -> None:
        """Step `index`'s results into `values` (rounded to bf16 where they are stored so, under `storage`)."""
        if len(results) != len(step.results):
            fail(f"step {index} ({step.op}) gives {len(results)} results; "
                 f"the program names {len(step.results)}")
        if storage:
            results = [round_bf16(r) if store == "bf16" else r
                       for r, store in zip(results, step.stores or [""] * len(results), strict=True)]
        values.update(zip(step.results, results, strict=True))

    def collect(self, values: dict[int, np.ndarray]) -> list[np.ndarray]:
        missing = [v for v in self.outputs if v not in values]
        if missing:
            fail(f"the program's output %{missing[0]} is never computed")
        return [values[v] for v in self.outputs]

    def run_step(self, step: Step, values: dict[int, np.ndarray]) -> list[np.ndarray]:
        if step.op not in OPS:
            fail(f"unknown op '{step.op}' in the program")
        if step.op == "all_reduce":
            fail("all_reduce sums over the ranks of a sharded step: run the rank programs together "
                 "(lanec.interp.tp.run_ranks)")

        def value(id_: int) -> np.ndarray:
            if id_ not in values:
                fail(f"{step.op} reads %{id_} before it is computed")
            return values[id_]

        args = {name: [value(i) for i in ids] if isinstance(ids, list) else value(ids)
                for name, ids in step.operands.items()}
        props = dict(step.properties)
        words = props.pop("quantize", 0)
        if step.op == "mixture" and step.operands["router"] in getattr(self, "_routing", {}):
            props["hint"] = self._routing[step.operands["router"]]
        if step.op in TOKEN_OPS:
            props["tokens"] = self.tokens
        if step.op == "product":
            weights = args.pop("w")
            if all(k in props for k in PART):
                results = [ops.product_part(args["x"], w, **props) for w in weights]
            else:
                results = [ops.product(args["x"], w) for w in weights]
        else:
            result = OPS[step.op](**args, **props)
            results = list(result) if isinstance(result, tuple) else [result]
        if words:  # the epilogue quantizes the op's own results (a norm's sum stays as it is)
            count = len(results) if step.op == "product" else 1
            results[:count] = [ops.quantize(r, words) for r in results[:count]]
        return results

    # -- JSON ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Program:
        try:
            return cls(
                batch=int(data["batch"]),
                tokens=int(data["tokens"]),
                inputs=[Input(**d) for d in data["inputs"]],
                weights=[Weight(**d) for d in data["weights"]],
                states=[State(**d) for d in data["states"]],
                steps=[Step(**d) for d in data["steps"]],
                outputs=[int(v) for v in data["outputs"]],
            )
        except (KeyError, TypeError, ValueError) as error:
            raise InterpretError(f"not an interpreter program: {type(error).__name__} {error}") from None

    @classmethod
    def from_json(cls, text: str) -> Program:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InterpretError(f"not an interpreter program: {error}") from None
        if not isinstance(data, dict):
            fail("not an interpreter program: expected a JSON object")
        return cls.from_dict(data)


def declared(table: dict[str, np.ndarray], key: str, decl: Input | Weight | State, what: str) -> np.ndarray:
    """The environment's array for a declaration, checked against the declared shape."""
    if key not in table:
        fail(f"the environment has no {what} '{key}'")
    array = table[key]
    if not isinstance(array, np.ndarray) and not (what == "weight" and isinstance(array, LazyWeight)):
        fail(f"the {what} '{key}' is a {type(array).__name__}, not a numpy array")
    if list(array.shape) != list(decl.shape):
        fail(f"the {what} '{key}' is {list(array.shape)}; the program declares {list(decl.shape)}")
    return array
