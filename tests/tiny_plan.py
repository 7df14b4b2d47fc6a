"""A plan small enough to write by hand, for the runtime's CPU tests (test_runtime_cpu.py,
test_run_faults.py): an embedding of 4 tokens and one product of `wqk` (the checkpoint's w.q and
w.k, concatenated at load), launched as one gemv whose cubin is never loaded on the CPU."""

from __future__ import annotations

from lanec.interp.program import Input, Program, Step, Weight
from lanec.runtime.plan import Arg, Buffer, Launch, Plan, Shape, Source, Transform, WeightBinding

VOCAB, DIM, ROWS = 50, 64, 32


def embed_program() -> Program:
    return Program(
        batch=4, tokens=1,
        inputs=[Input(0, "tokens", [4], "i32")],
        weights=[Weight(1, "embed", "bf16", [VOCAB, DIM], "bf16"), Weight(2, "w.q", "bf16", [ROWS, DIM], "bf16"),
                 Weight(3, "w.k", "bf16", [ROWS, DIM], "bf16")],
        states=[],
        steps=[Step("embed", {"tokens": 0, "table": 1}, [4]), Step("product", {"x": 4, "w": [2, 3]}, [5, 6])],
        outputs=[5, 6],
    )


def embed_plan(path) -> None:
    plan = Plan(program=embed_program().to_json(), form="// the form text\n")
    kernel = plan.add_cubin(b"not run on the CPU")
    plan.buffers = [Buffer("tokens", (4,), "int32", "input", "tokens"),
                    Buffer("embed", (VOCAB, DIM), "bfloat16", "weight"),
                    Buffer("wqk", (2 * ROWS, DIM), "bfloat16", "weight"),
                    Buffer("x", (4, DIM), "bfloat16", "activation"),
                    Buffer("q", (4, ROWS), "bfloat16", "output", 0), Buffer("k", (4, ROWS), "bfloat16", "output", 1)]
    plan.weights = [WeightBinding("embed", (Source("embed", (VOCAB, DIM), scale=1.0),)),
                    WeightBinding("wqk", (Source("w.q", (ROWS, DIM)), Source("w.k", (ROWS, DIM))),
                                  (Transform("concatenate"),))]
    plan.launches = [Launch("gemv qk", kernel, "gemv", Shape((8, 1, 1), (128, 1, 1)), (Arg("x"), Arg("wqk"), Arg("q")))]
    plan.write(path)
