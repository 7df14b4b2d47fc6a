"""A GGUF file written by the gguf package for a small Llama-style model (tests/gpu/gguf_model.py:
its projections and lm head Q8_0, its embed table and norms F32, llama.cpp's names and q / k
permutation) runs on the GPU with `lanec run plan --weights model.gguf --check`: the plan with Q8_0
checkpoint rows (the GGUF's blocks bound as they are, read by q8_gemv and q8_gated_gemv), with two
words and the norms' quantize epilogue, and the bf16 plan (the blocks bound as their values); each
on four seeds' inputs. The one-word plan is held to tolerance.ONE_WORD times the step's bound."""

from __future__ import annotations

from pathlib import Path

import pytest
from loader import load

from lanec.runtime.plan import Plan
from lanec.runtime.runner import Options, execute

HERE = Path(__file__).resolve().parent
model = load("lanec_gpu_gguf_model", HERE / "gguf_model.py")


@pytest.mark.parametrize("seed", [1, 2, 3, 5])
@pytest.mark.parametrize("name", sorted(model.PLANS))
def test_a_gguf_checkpoint_runs_with_check(name, seed):
    path = model.OUT / f"{name}.plan"
    if not path.is_file() or not model.GGUF.is_file():
        pytest.fail(f"{path} or {model.GGUF} is missing: run `python tests/gpu/gguf_model.py` on the CPU machine "
                    "and carry build/", pytrace=False)
    kernels = {launch.name.split()[0] for launch in Plan.read(path).launches}  # "q8_gemv <product>"
    q8, _ = model.PLANS[name]
    assert ("q8_gemv" in kernels) == q8 and ("gemv" in kernels) != q8
    lines: list[str] = []
    status = execute(path, Options(check=True, weights=model.GGUF, seed=seed), lines.append)
    assert status == 0, "\n".join(lines)
    assert lines[-1].startswith("check: ") and lines[-1].endswith("agree with the interpreter"), lines[-1]
