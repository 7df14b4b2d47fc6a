"""`lanec run --check`'s comparison, on the CPU: a stand-in for the GPU session runs the plan's
program as the kernels would (bf16 stores rounded), and the check must agree with it, name a
buffer that differs, and accept a token chosen in a near tie."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from forms import DENSE as FORM

from lanec.cli import main
from lanec.runtime import runner, tolerance
from lanec.runtime.runner import Options, execute


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("check")
    (folder / "small.mlir").write_text(FORM)
    result = CliRunner().invoke(main, ["compile", str(folder / "small.mlir"), "-o", str(folder / "small.plan")])
    assert result.exit_code == 0, result.output
    return folder / "small.plan"


def stand_in(perturb=None):
    """A Session that computes the step with the interpreter (bf16 stores), then `perturb`s what
    it read back, as a kernel with an error would."""

    class Session:
        def __init__(self, plan, env, sources, pdl=True, seed=None):
            self.plan, self.env = plan, env.copy()
            self.program = runner_program[0]
            self.stream = type("S", (), {"synchronize": lambda self: None})()
            self.values: dict[str, np.ndarray] = {}

        def step_function(self, graph):
            def step():
                outputs = self.program.run(self.env, storage=True)
                for spec in self.plan.buffers:
                    if spec.role == "output":
                        self.values[spec.name] = np.asarray(outputs[spec.source])
            return step

        def read(self, name):
            value = self.values[name].copy()
            return perturb(name, value, self.values) if perturb else value

    return Session


runner_program: list = []


@pytest.fixture
def check(plan_path, monkeypatch):
    def run(perturb=None) -> tuple[int, str]:
        plan, program, env, sources = runner.load(plan_path, Options(check=True))
        runner_program[:] = [program]
        monkeypatch.setattr(runner, "Session", stand_in(perturb))
        lines: list[str] = []
        status = runner.check(plan, program, env, sources, Options(check=True), lines.append)
        return status, "\n".join(lines)

    return run


def test_the_kernels_own_result_agrees(check):
    status, report = check()
    assert status == 0, report
    assert "check: 2 of 2 agree with the interpreter" in report


def test_a_wrong_output_is_named(check):
    status, report = check(lambda name, v, _: v * 1.1 if v.dtype.kind == "f" else v)
    assert status == 1
    assert "MISMATCH" in report and "mismatch in" in report.splitlines()[-1]


def test_an_unwritten_element_is_named(check):
    def poison(name, value, _):
        if value.dtype.kind == "f":
            value = value.astype(np.float32)
            value.flat[5] = np.nan
        return value

    status, report = check(poison)
    assert status == 1 and "never written" in report


def test_tokens_are_judged_against_the_logits(check):
    def far(name, value, values):
        if value.dtype.kind == "i":
            logits = next(v for v in values.values() if v.dtype.kind == "f")
            value = value.copy()
            value[1] = int(np.argmin(logits[1]))  # the worst token of row 1
        return value

    status, report = check(far)
    assert status == 1 and "rows chose a token far from the best" in report


def test_execute_refuses_check_and_interpret_together(plan_path):
    with pytest.raises(runner.RunError):
        execute(plan_path, Options(check=True, interpret=True))


def test_states_are_held_to_the_bf16_tolerance():
    assert tolerance.state("float32") == tolerance.STEP["bfloat16"]
    assert tolerance.state("bfloat16") == tolerance.STEP["bfloat16"]


def test_a_difference_just_inside_the_step_tolerance_passes_and_just_outside_fails():
    want = np.random.default_rng().standard_normal(64).astype(np.float32)
    bound = tolerance.STEP["bfloat16"].atol * float(np.abs(want).max())
    for factor, ok in ((0.99, True), (1.01, False)):
        got = want.copy()
        got[7] += np.float32(factor * bound)
        result = runner.compare("y", "output", "bfloat16", got, want)
        assert result.ok is ok, (factor, result)
    assert not runner.compare("t", "output", "int32", np.array([1, 2]), np.array([1, 3])).ok


def test_a_deep_value_is_held_to_a_bound_grown_by_the_root_of_its_layers():
    step = tolerance.STEP["bfloat16"]
    assert tolerance.deep(step, 1) == step and tolerance.deep(step, tolerance.CALIBRATED_LAYERS) == step
    assert tolerance.deep(step, 27).atol == pytest.approx(step.atol * (27 / tolerance.CALIBRATED_LAYERS) ** 0.5)
    # the same difference fails after 4 layers and passes after 27
    want = np.random.default_rng().standard_normal(64).astype(np.float32)
    got = want.copy()
    got[3] += np.float32(1.5 * step.atol * float(np.abs(want).max()))
    assert not runner.compare("y", "state", "bfloat16", got, want, tolerance.deep(step, 4)).ok
    assert runner.compare("y", "state", "bfloat16", got, want, tolerance.deep(step, 27)).ok


def test_a_buffers_depth_is_its_layer_and_an_output_passes_all_of_them():
    class Spec:
        def __init__(self, name):
            self.name = name

    class FakePlan:
        buffers = [Spec("model.layers.0.conv"), Spec("model.layers.26.latent"), Spec("lm_head.out")]

    depth = runner.layer_depths(FakePlan())
    assert (depth("model.layers.0.conv"), depth("model.layers.26.latent"), depth("lm_head.out")) == (1, 27, 27)


def test_the_routing_a_check_follows_has_a_near_tie_margin_grown_with_the_routers_depth():
    """`gpu_routing`: each router's GPU choice as an `ops.Hint` whose margin is ROUTING_TIE grown
    as the step tolerance grows with depth (a router of layer 20 reads inputs 21 layers deep)."""
    from types import SimpleNamespace

    from lanec.interp import ops

    routers = ["model.layers.1.mlp.gate.weight", "model.layers.20.mlp.gate.weight"]
    ids = {f"{name}.ids": np.arange(6, dtype=np.int32).reshape(3, 2) + i for i, name in enumerate(routers)}
    buffers = [SimpleNamespace(name=name) for name in [*ids, "model.layers.26.latent", "lm_head.out"]]
    session = SimpleNamespace(plan=SimpleNamespace(buffers=buffers), read=lambda name: ids[name].copy())
    program = SimpleNamespace(weights=[SimpleNamespace(name=name) for name in [*routers, "embed"]])
    hints = runner.gpu_routing(session, program)
    assert sorted(hints) == routers
    shallow, deep = hints[routers[0]], hints[routers[1]]
    assert shallow.tie == ops.ROUTING_TIE  # 2 layers deep: the calibrated 4 or fewer
    assert deep.tie == pytest.approx(ops.ROUTING_TIE * (21 / 4) ** 0.5)
    np.testing.assert_array_equal(deep.ids, ids[f"{routers[1]}.ids"])
    assert shallow.farther == [] and deep.farther == []  # filled by the mixtures that follow them


def test_a_step_reading_one_word_int8_activations_is_held_to_the_coarser_bound():
    """One int8 word a value: two correct computations may round a value to neighbouring int8
    steps (tolerance.ONE_WORD); a quantize of two words, or none, keeps the step's bound."""
    from types import SimpleNamespace

    def program(*steps):
        return SimpleNamespace(steps=[SimpleNamespace(op=op, properties=properties) for op, properties in steps])

    assert tolerance.reads_one_word(program(("product", {}), ("quantize", {"words": 1})))
    assert tolerance.reads_one_word(program(("norm", {"quantize": 1})))
    assert not tolerance.reads_one_word(program(("quantize", {"words": 2}), ("norm", {"quantize": 2}),
                                                ("product", {})))
    step = tolerance.STEP["bfloat16"]
    coarse = tolerance.one_word(step)
    assert coarse.atol == pytest.approx(step.atol * tolerance.ONE_WORD)
    want = np.random.default_rng().standard_normal(64).astype(np.float32)
    got = want.copy()
    got[3] += np.float32(1.5 * step.atol * float(np.abs(want).max()))  # the GGUF q8 plan's 3e-2 of scale
    assert not runner.compare("y", "output", "bfloat16", got, want, step).ok
    assert runner.compare("y", "output", "bfloat16", got, want, coarse).ok
