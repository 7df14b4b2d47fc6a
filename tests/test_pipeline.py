"""The pipeline as a library: `lanec opt -p ...,lower-to-lane` lowers exactly as `lanec compile`
does (one lowering, under the tuned schedule table), and the pipeline raises lanec's own errors
without click, which only the commands turn into click's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.diagnostics import FormError, LanecError, form_context, parse_verified
from lanec.dialects import lane
from lanec.pipeline import fuse, lower, parse_verify
from lanec.shim import LaneShim

ROOT = Path(__file__).resolve().parents[1]


def lane_step(module) -> lane.StepOp:
    (step,) = [op for op in module.ops if isinstance(op, lane.StepOp)]
    return step


@pytest.mark.parametrize("example", ["kimi-linear-kda.mlir", "dense-small.mlir"])
def test_the_lowering_pass_lowers_as_the_pipeline_does(example: str):
    path = ROOT / "examples" / example
    module, where = parse_verify(path)
    fuse(module, LaneShim(), where)
    compiled = str(lane_step(lower(module, where)))
    result = CliRunner().invoke(main, ["opt", str(path), "-p", "lane-before,shared,held-back,lower-to-lane"])
    assert result.exit_code == 0, result.output
    printed = str(lane_step(parse_verified(form_context(), result.stdout, "opt")))
    assert printed == compiled
    if example.startswith("kimi"):  # the tuned table's choice shows in what opt prints
        assert "schedule = {early = 1 : i64" in printed


def test_the_pipeline_raises_its_own_errors_and_needs_no_click():
    script = textwrap.dedent(f"""
        import sys

        class NoClick:
            def find_spec(self, name, path=None, target=None):
                if name == "click" or name.startswith("click."):
                    raise ImportError("click is not importable here")

        sys.meta_path.insert(0, NoClick())
        from lanec.diagnostics import FormError, LanecError
        from lanec.pipeline import compile_rules, lower, parse_verify
        from lanec.shim import LaneShim

        module, decisions = compile_rules({str(ROOT / "examples" / "kimi-linear-kda.mlir")!r}, LaneShim())
        lower(module, "kda")
        try:
            parse_verify("form.step batch 1 tokens 1 {{", "bad.mlir")
        except FormError as error:
            assert isinstance(error, LanecError) and str(error).startswith("bad.mlir:"), error
        assert "click" not in sys.modules
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_a_form_error_is_a_lanec_error_with_its_cause():
    with pytest.raises(FormError) as caught:
        parse_verify("form.step batch 1 tokens 1 {", "bad.mlir")
    assert isinstance(caught.value, LanecError)
    assert str(caught.value) == f"{caught.value.where}: error: {caught.value.message}"


def test_the_commands_print_lanec_errors_as_one_line(tmp_path: Path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("form.step batch 1 tokens 1 {\n")
    for command in (["compile", str(bad), "-o", str(tmp_path / "bad.plan")], ["explain", str(bad)],
                    ["opt", str(bad)]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 1, (command, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(f"{bad}:"), result.stderr


def test_lanec_run_has_click_options():
    result = CliRunner().invoke(main, ["run", "--help"])
    assert result.exit_code == 0
    assert result.output.startswith("Usage: main run [OPTIONS] PLAN")  # click's usage line, as every command's
    for option in ("--steps", "--check", "--interpret", "--graph / --no-graph", "--pdl / --no-pdl", "--seed",
                   "--weights", "--repeats"):
        assert option in result.output, option
    result = CliRunner().invoke(main, ["run", "plan.bin", "--steps", "many"])
    assert result.exit_code == 2 and "'many' is not a valid integer" in result.output
