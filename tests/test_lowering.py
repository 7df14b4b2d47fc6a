"""The lowering to the lane on the shipped KDA-only example: one KdaSplit launch per KDA layer
with its cluster, PDL and tuned schedule, the product in parts read in place, and rows beyond a
GEMV's split into launches."""

from __future__ import annotations

from pathlib import Path

import pytest

from lanec.codegen.lower import lower_module
from lanec.codegen.schedules import kda_schedule, schedule_for
from lanec.codegen.spec import spec_of
from lanec.dialects import lane
from lanec.pipeline import fuse, parse_verify
from lanec.shim import LaneShim

ROOT = Path(__file__).resolve().parents[1]


def launches(source: Path):
    module, where = parse_verify(source)
    fuse(module, LaneShim(), where)
    lowered = lower_module(module)
    lowered.verify()
    step = next(iter(lowered.ops))
    return [op for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]


@pytest.fixture(scope="module")
def kda_launches():
    return launches(ROOT / "examples" / "kimi-linear-kda.mlir")


def test_one_kda_split_launch_per_kda_layer_with_cluster_pdl_and_the_tuned_schedule(kda_launches):
    kda = [op for op in kda_launches if op.kernel.data == "kda_split"]
    text = (ROOT / "examples" / "kimi-linear-kda.mlir").read_text()
    assert len(kda) == text.count("form.delta_rule") == 3
    for op in kda:
        spec = spec_of(op)
        assert tuple(op.cluster.get_values()) == (8, 1, 1)  # the seed's batch-1 cluster
        assert tuple(op.grid.get_values()) == (8, 32, 1)
        assert bool(op.pdl.value.data)
        tuned = schedule_for("kda_split", {"heads": 32, "batch": 1, "tokens": 1})
        # every knob recorded by name: the table's over the shape's defaults
        assert spec["schedule"] == kda_schedule(32, 1, tuned).as_dict() and spec["schedule"]["early"] == 1
        assert spec["schedule"]["release_at_entry"] and spec["schedule"]["cluster"] == 8
        assert spec["gate_form"] == "softplus"
        # q, k, v, f_a and beta are parts of one product in parts, read in place at its pitch
        assert spec["x_pitch"] == spec["raw_gate_pitch"] == spec["beta_pitch"] == 3 * 4096 + 128 + 32 + 128


def test_the_kda_layer_is_four_launches_between_its_norms(kda_launches):
    kinds = [op.kernel.data for op in kda_launches]
    first = kinds.index("kda_split")
    # norm, the GEMV in parts (q k v f_a b g_a), g_b's GEMV, KdaSplit, o_proj's GEMV
    assert kinds[first - 3: first + 2] == ["rmsnorm", "gemv", "gemv", "kda_split", "gemv"]
    parts = spec_of(kda_launches[first - 2])["parts"]
    assert parts == (4096, 4096, 4096, 128, 32, 128)


def test_rows_beyond_a_gemv_are_split_into_launches(tmp_path):
    from click.testing import CliRunner

    from lanec.cli import main

    out = tmp_path / "b64.mlir"
    result = CliRunner().invoke(main, ["import", str(ROOT / "examples" / "kimi-linear-48b-a3b.config.json"),
                                       "--kda-only", "--dense-mlp", "9216", "--layers", "1", "--batch", "64",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    module, where = parse_verify(out)
    fuse(module, LaneShim(), where)
    step = next(iter(lower_module(module).ops))
    ops = [op for op in step.body.block.ops if isinstance(op, lane.LaunchOp)]
    o_proj = [op for op in ops if op.kernel.data == "gemv" and spec_of(op)["parts"] == (2304,)
              and spec_of(op)["width"] == 4096]
    assert [spec_of(op)["rows"] for op in o_proj] == [32, 32]
    kda = [op for op in ops if op.kernel.data == "kda_split"]
    assert len(kda) == 1 and spec_of(kda[0])["batch"] == 64


def test_the_whole_kimi_example_names_every_op_without_a_kernel(tmp_path):
    from click.testing import CliRunner

    from lanec.cli import main

    result = CliRunner().invoke(main, ["compile", str(ROOT / "examples" / "kimi-linear-small.mlir"),
                                       "-o", str(tmp_path / "k.plan")])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].endswith(
        "error: no lane kernel for: form.latent_attention x1, form.mixture x3")
    assert not (tmp_path / "k.plan").exists()
