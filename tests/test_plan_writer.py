"""`lanec compile` end to end on the CPU: the plan of the KDA-only Kimi Linear variant holds one
KdaSplit launch a KDA layer, weights made from the form's weights by recorded transforms (the
product in parts' rows back to back; the three conv weights as one [3, 4, dim] buffer), views
bound at their offsets, and the fused form as its oracle."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.interp.program import Program
from lanec.runtime.dtypes import from_bf16, round_bf16
from lanec.runtime.plan import Plan
from lanec.runtime.weights import make

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def kda_plan(tmp_path_factory) -> Plan:
    folder = tmp_path_factory.mktemp("plan")
    runner = CliRunner()
    form = folder / "kda.mlir"
    result = runner.invoke(main, ["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"), "--kda-only",
                                  "--dense-mlp", "9216", "--layers", "1", "-o", str(form)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["compile", str(form), "-o", str(folder / "kda.plan")])
    assert result.exit_code == 0, result.output
    return Plan.read(folder / "kda.plan")


def test_one_kda_split_launch_with_its_cluster(kda_plan: Plan):
    kda = [launch for launch in kda_plan.launches if launch.name.startswith("kda_split")]
    assert len(kda) == 1
    assert kda[0].shape.cluster == (8, 1, 1) and kda[0].shape.block == (160, 1, 1) and kda[0].shape.pdl
    assert kda[0].shape.grid == (8, 32, 1)
    # the compiler's choice is in the plan: batch 1 at 32 heads takes the table's early loads
    assert kda[0].spec["heads"] == 32 and kda[0].spec["batch"] == 1 and kda[0].spec["schedule"]["early"] == 1


def test_kda_split_reads_q_k_v_f_a_and_beta_in_place(kda_plan: Plan):
    kda = next(launch for launch in kda_plan.launches if launch.name.startswith("kda_split"))
    x, raw_gate, beta = kda.args[0], kda.args[3], kda.args[4]
    assert x.buffer == raw_gate.buffer == beta.buffer  # one product in parts
    assert (x.offset, raw_gate.offset, beta.offset) == (0, 3 * 4096, 3 * 4096 + 128)
    assert kda_plan.buffer(x.buffer).shape == (1, 3 * 4096 + 128 + 32 + 128)


def test_weights_are_made_by_recorded_transforms(kda_plan: Plan):
    rng = np.random.default_rng(0)
    conv = next(w for w in kda_plan.weights if [t.kind for t in w.transforms] == ["stack", "transpose"])
    values = {s.name: rng.standard_normal(s.shape).astype(np.float32) for s in conv.sources}
    made = make(conv, values, kda_plan)
    names = [s.name for s in conv.sources]
    assert [n.rsplit(".", 2)[-2] for n in names] == ["q_conv1d", "k_conv1d", "v_conv1d"]
    assert made.shape == (3, 4, 4096)
    stored = from_bf16(made)  # the buffer holds bf16 bits
    for index, name in enumerate(names):  # [section, tap, channel] from [channel, tap]
        assert np.array_equal(stored[index], round_bf16(values[name].T))
    parts = next(w for w in kda_plan.weights if len(w.sources) == 6)
    assert [t.kind for t in parts.transforms] == ["concatenate"]
    assert kda_plan.buffer(parts.buffer).shape == (12576, 2304)


def test_the_oracle_is_the_fused_form(kda_plan: Plan):
    program = Program.from_json(kda_plan.program)
    ops = [step.op for step in program.steps]
    assert ops.count("kda") == 1 and "delta_rule" not in ops and "gated_product" in ops
    assert all(step.stores for step in program.steps)
    assert "form.delta_rule" in kda_plan.form  # the form as written, for people
    assert json.loads(kda_plan.program)["batch"] == 1
