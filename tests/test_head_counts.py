"""Every KDA head count compiles: Kimi Linear's KDA-only variant with 1 to 64 heads (hidden = heads x
128) imports and compiles, and its merged q, k, v, f_a, b, g_a product gives every part a place of
whole 16-byte vectors (b is one value a head), made honestly by its weight binding (zero rows in
the gaps) and read in place there by KdaSplit and g_b's GEMV. The plan's oracle keeps the original
form's meaning, and `--check` runs it with a stand-in for the GPU that makes every weight buffer
through its binding.

3, 6 and 12 heads run always; every head count of the acceptance with LANEC_SLOW=1."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.codegen.lower import PART_ALIGN
from lanec.diagnostics import load_module
from lanec.interp.lower import program_of
from lanec.runtime import runner, weights
from lanec.runtime.dtypes import from_bf16, round_bf16
from lanec.runtime.plan import Plan
from lanec.runtime.runner import Options

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("lanec_gpu_plans", ROOT / "tests" / "gpu" / "plans.py")
gpu_plans = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_plans)

ALWAYS = (3, 6, 12)
HEADS = (1, 2, 3, 5, 6, 7, 12, 32, 48, 64)
SIZE = 128  # the config's KDA head size
SLOW = pytest.mark.skipif(not os.environ.get("LANEC_SLOW"), reason="every head count: set LANEC_SLOW=1")
# small vocabulary and MLP: the layers' shapes are the head count's, the compile stays quick
IMPORT = ["--kda-only", "--dense-mlp", "1024", "--layers", "2", "--batch", "5"]


def aligned(n: int) -> int:
    return -(-n // PART_ALIGN) * PART_ALIGN


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """heads -> (form file, plan file), each compiled once."""
    folder = tmp_path_factory.mktemp("heads")
    made: dict[int, tuple[Path, Path]] = {}

    def compile_heads(heads: int) -> tuple[Path, Path]:
        if heads not in made:
            config = folder / f"h{heads}.config.json"
            config.write_text(json.dumps(gpu_plans.kimi_config(heads, vocab_size=512)))
            form, plan = folder / f"h{heads}.mlir", folder / f"h{heads}.plan"
            runner_ = CliRunner()
            result = runner_.invoke(main, ["import", str(config), *IMPORT, "-o", str(form)])
            assert result.exit_code == 0, result.output
            result = runner_.invoke(main, ["compile", str(form), "-o", str(plan)])
            assert result.exit_code == 0, result.output
            made[heads] = (form, plan)
        return made[heads]

    return compile_heads


@pytest.mark.parametrize("heads", [h if h in ALWAYS else pytest.param(h, marks=[pytest.mark.slow, SLOW])
                                   for h in HEADS])
def test_every_head_count_compiles_with_aligned_parts(compiled, heads: int):
    _, path = compiled(heads)
    plan = Plan.read(path)
    dim = heads * SIZE
    sizes = [dim, dim, dim, SIZE, heads, SIZE]  # q, k, v, f_a, b, g_a
    places = np.cumsum([0] + [aligned(n) for n in sizes])
    pitch = int(places[-1])
    assert pitch % PART_ALIGN == 0
    merged = [b for b in plan.weights if len(b.sources) == 6]
    assert len(merged) == 2  # one a layer
    for binding in merged:
        # the binding makes the buffer the GEMV reads: each part's rows at its place, zeros between
        assert plan.buffer(binding.buffer).shape == (pitch, dim)  # hidden = heads x 128 = dim
        rng = np.random.default_rng(heads)
        values = {s.name: rng.standard_normal(s.shape).astype(np.float32) for s in binding.sources}
        made = weights.make(binding, values, plan)
        stored = from_bf16(made)
        for source, start, end in zip(binding.sources, places[:-1], places[1:], strict=True):
            rows = source.shape[0]
            assert np.array_equal(stored[start:start + rows], round_bf16(values[source.name]))
            assert not stored[start + rows:end].any()
    for launch in plan.launches:
        if launch.name.startswith("kda_split"):
            x, raw_gate, beta = launch.args[0], launch.args[3], launch.args[4]
            assert (x.offset, raw_gate.offset, beta.offset) == (0, places[3], places[4])
            assert launch.spec["x_pitch"] == launch.spec["raw_gate_pitch"] == launch.spec["beta_pitch"] == pitch
    g_b = [launch for launch in plan.launches
           if launch.spec.get("x_pitch") == pitch and not launch.name.startswith("kda_split")]
    assert [launch.args[0].offset for launch in g_b] == [places[5]] * 2  # g_a, read in place by g_b's GEMV


def stand_in(program):
    """A GPU Session that makes every weight buffer through its binding (checked against the
    buffer's shape), then computes the step with the interpreter (bf16 stores)."""

    class Session:
        def __init__(self, plan, env, sources, pdl=True, seed=None):
            for binding in plan.weights:
                weights.make(binding, sources, plan)
            self.plan, self.env = plan, env.copy()
            self.stream = type("S", (), {"synchronize": lambda self: None})()
            self.values: dict[str, np.ndarray] = {}

        def step_function(self, graph):
            def step():
                outputs = program.run(self.env, storage=True)
                for spec in self.plan.buffers:
                    if spec.role == "output":
                        self.values[spec.name] = np.asarray(outputs[spec.source])
                    elif spec.role == "state":
                        self.values[spec.name] = np.asarray(self.env.states[spec.source])
            return step

        def read(self, name):
            return self.values[name]

    return Session


def relative(reference, value) -> float:
    reference, value = np.asarray(reference, np.float64), np.asarray(value, np.float64)
    return float(np.max(np.abs(reference - value))) / max(float(np.max(np.abs(reference))), 1e-30)


@pytest.mark.parametrize("heads", ALWAYS)
def test_the_plan_keeps_the_forms_meaning_and_checks(compiled, heads: int, monkeypatch):
    form, path = compiled(heads)
    plan, program, env, sources = runner.load(path, Options(check=True))
    original = program_of(load_module(form))
    fused_env, original_env = env.copy(), env.copy()
    fused, unfused = program.run(fused_env), original.run(original_env)
    for got, want in zip(fused, unfused, strict=True):
        assert relative(want, got) < 1e-5
    for name, state in original_env.states.items():
        assert relative(state, fused_env.states[name]) < 1e-5, name
    monkeypatch.setattr(runner, "Session", stand_in(program))
    lines: list[str] = []
    assert runner.check(plan, program, env, sources, Options(check=True), lines.append) == 0, "\n".join(lines)
    assert lines[-1].startswith("check: ") and "agree with the interpreter" in lines[-1]
