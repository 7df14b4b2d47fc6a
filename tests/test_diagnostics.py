"""A bad form file is one line `file:line:col: error: message`, never a traceback: through
`load_module`, through click's CliRunner, and through a subprocess run of `lanec opt`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float32Type,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Operation
from xdsl.utils.exceptions import VerifyException

from lanec.cli import main
from lanec.diagnostics import FormError, load_module
from lanec.dialects.form import StepOp, WeightOp

GOOD = """\
form.step batch 1 tokens 1 {
  %tokens = form.input {role = "tokens"} : tensor<1xi32>
  %table = form.weight {name = "embed", format = "bf16"} : tensor<32x16xbf16>
  %h = form.embed %tokens, %table : (tensor<1xi32>, tensor<32x16xbf16>) -> tensor<1x16xbf16>
  form.return %h : tensor<1x16xbf16>
}
"""

# name -> (text, the one line it must give when the file is called bad.mlir)
BAD = {
    "syntax error": (
        GOOD.replace('{role = "tokens"} :', '{role = "tokens"}'),
        "bad.mlir:2:42: error: Expected ':'",
    ),
    "unknown op": (
        GOOD.replace("form.embed", "form.embedding"),
        "bad.mlir:4:23: error: Operation form.embedding is not registered",
    ),
    "shape mismatch": (
        GOOD.replace("tensor<32x16xbf16>", "tensor<32x8xbf16>"),
        "bad.mlir:4:3: error: embed result must be [rows, hidden]",
    ),
    "step against its input": (
        GOOD.replace("batch 1 tokens 1", "batch 2 tokens 1"),
        "bad.mlir:2:3: error: the tokens input has 1 rows; the step has 2",
    ),
    "nested op's own check": (
        GOOD.replace('format = "bf16"', 'format = "q4_k"'),
        "bad.mlir:3:3: error: weight format 'q4_k': one of bf16, q8_0",
    ),
    "undefined value": (
        GOOD.replace("form.return %h", "form.return %g"),
        "bad.mlir:5:15: error: value %g is used but not defined",
    ),
}


def test_load_module_parses_and_verifies_text():
    module = load_module(GOOD, "good.mlir")
    assert isinstance(module, ModuleOp)
    (step,) = [op for op in module.walk() if isinstance(op, StepOp)]
    assert step.rows == 1
    names = [op.name for op in step.body.block.ops]
    assert names == ["form.input", "form.weight", "form.embed", "form.return"]


def test_load_module_reads_a_path(tmp_path: Path):
    path = tmp_path / "good.mlir"
    path.write_text(GOOD)
    assert isinstance(load_module(path), ModuleOp)
    assert isinstance(load_module(str(path)), ModuleOp)


@pytest.mark.parametrize("case", sorted(BAD))
def test_load_module_reports_one_located_line(case: str):
    text, expected = BAD[case]
    with pytest.raises(FormError) as caught:
        load_module(text, "bad.mlir")
    assert str(caught.value) == expected
    assert "\n" not in str(caught.value)


def test_load_module_names_a_file_it_was_given(tmp_path: Path):
    path = tmp_path / "bad.mlir"
    path.write_text(BAD["shape mismatch"][0])
    with pytest.raises(FormError) as caught:
        load_module(path)
    assert str(caught.value) == f"{path}:4:3: error: embed result must be [rows, hidden]"


def test_unreadable_files_are_one_line(tmp_path: Path):
    with pytest.raises(FormError, match=r"missing\.mlir: error: cannot read: No such file or directory$"):
        load_module(tmp_path / "missing.mlir")
    binary = tmp_path / "binary.mlir"
    binary.write_bytes(b"form.step \xff\xfe")
    with pytest.raises(FormError, match=r"binary\.mlir: error: not UTF-8 text \(byte 10\)$"):
        load_module(binary)


def test_an_empty_file_is_a_diagnostic():
    with pytest.raises(FormError, match=r"^empty\.mlir:1:1: error: Could not parse entire input!$"):
        load_module("", "empty.mlir")


def test_form_error_prints_its_line_alone():
    from lanec.commands import reported

    runner = CliRunner()
    error = FormError("x.mlir:3:4", "first\nsecond")
    assert str(error) == "x.mlir:3:4: error: first; second"
    assert error.message == "first; second"

    @click.command()
    def fails() -> None:
        with reported():
            raise error

    result = runner.invoke(fails)
    assert result.exit_code == 1
    assert result.stderr == "x.mlir:3:4: error: first; second\n"


@pytest.mark.parametrize("case", sorted(BAD))
def test_lanec_opt_in_process_gives_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str):
    text, expected = BAD[case]
    (tmp_path / "bad.mlir").write_text(text)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["opt", "bad.mlir"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.splitlines() == [expected]
    assert result.stdout == ""


def test_split_input_file_counts_lines_of_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "split.mlir").write_text(GOOD + "// -----\n" + BAD["shape mismatch"][0])
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["opt", "split.mlir", "--split-input-file"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["split.mlir:11:3: error: embed result must be [rows, hidden]"]
    # The first chunk was good and printed before the second failed.
    assert "form.embed %tokens, %table" in result.stdout


def test_verify_diagnostics_keeps_xdsl_behaviour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "bad.mlir").write_text(BAD["shape mismatch"][0])
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["opt", "bad.mlir", "--verify-diagnostics"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "embed result must be [rows, hidden]"
    assert "| Operation does not verify: embed result must be [rows, hidden]" in result.stdout


def test_parsing_diagnostics_keeps_xdsl_behaviour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "bad.mlir").write_text(BAD["unknown op"][0])
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["opt", "bad.mlir", "--parsing-diagnostics"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "bad.mlir:4:23"
    assert "Operation form.embedding is not registered" in result.stdout


def lanec_executable() -> str:
    found = Path(sys.executable).parent / "lanec"
    return str(found) if found.exists() else shutil.which("lanec") or "lanec"


@pytest.mark.parametrize("case", ["syntax error", "unknown op", "shape mismatch"])
def test_lanec_opt_subprocess_gives_one_line(tmp_path: Path, case: str):
    text, expected = BAD[case]
    (tmp_path / "bad.mlir").write_text(text)
    run = subprocess.run([lanec_executable(), "opt", "bad.mlir"], cwd=tmp_path, capture_output=True,
                         text=True)
    assert run.returncode != 0
    assert run.stderr.splitlines() == [expected]
    assert "Traceback" not in run.stderr + run.stdout


def test_lanec_opt_subprocess_missing_file(tmp_path: Path):
    run = subprocess.run([lanec_executable(), "opt", "nowhere.mlir"], cwd=tmp_path, capture_output=True,
                         text=True)
    assert run.returncode != 0
    assert run.stderr.splitlines() == ["nowhere.mlir: error: cannot read: No such file or directory"]


# Every verifier fails with a message (a VerifyException), never a Python error, however its
# op is broken: an operand of any shape and element type (from a new form.weight), or an integer
# property of any value. The ops are those of the dialect's round-trip test: every form op.

OPS_TEST = Path(__file__).resolve().parent / "filecheck" / "dialect" / "ops.mlir"
STEPS = OPS_TEST.read_text().split("// -----")


MODULES = [load_module(text, "ops.mlir") for text in STEPS]


def form_ops(step: int) -> list[Operation]:
    """A fresh copy of the step's ops, to break."""
    return [op for op in MODULES[step].clone().walk() if op.name.startswith("form.")]


OPERANDS = [(step, index, operand) for step in range(len(STEPS))
            for index, op in enumerate(form_ops(step)) for operand in range(len(op.operands))]
INTEGER_PROPERTIES = [(step, index, name) for step in range(len(STEPS))
                      for index, op in enumerate(form_ops(step))
                      for name, value in sorted(op.properties.items()) if isinstance(value, IntegerAttr)]
ELEMENTS = {"bf16": BFloat16Type(), "f32": Float32Type(), "i8": IntegerType(8), "i32": i32}


def verify_each(op: Operation) -> None:
    for each in op.walk(region_first=True):
        try:
            each.verify(verify_nested_ops=False)
        except VerifyException:
            pass


@settings(max_examples=300, deadline=None)
@given(
    target=st.sampled_from(OPERANDS),
    dims=st.lists(st.sampled_from([1, 2, 3, 4, 8, 16, 32, 64]), max_size=4),
    element=st.sampled_from(sorted(ELEMENTS)),
)
def test_verifiers_never_crash_on_operands(target: tuple[int, int, int], dims: list[int], element: str):
    step, index, operand = target
    op = form_ops(step)[index]
    weight = WeightOp("mutated", TensorType(ELEMENTS[element], dims))
    op.parent.insert_op_before(weight, op)
    op.operands[operand] = weight.result
    verify_each(op.get_toplevel_object())


@settings(max_examples=200, deadline=None)
@given(target=st.sampled_from(INTEGER_PROPERTIES), value=st.sampled_from([-1, 0, 1, 2, 3, 5, 1 << 20]))
def test_verifiers_never_crash_on_properties(target: tuple[int, int, str], value: int):
    step, index, name = target
    op = form_ops(step)[index]
    op.properties[name] = IntegerAttr(value, i64)
    verify_each(op.get_toplevel_object())


# Where the lane cannot make a fusion, `lanec compile` names the cause: the held-back rule and the
# kernel fact, on one line, not the symptom the unfused ops meet in the lowering. And a form that
# verifies but that no kernel can take is one line naming the fact, never a traceback.

KIMI_TINY = Path(__file__).resolve().parent.parent / "examples" / "kimi-linear-tiny.config.json"


def imported_kda(tmp_path: Path, *, head_size: int = 128, heads: int = 8, conv: int = 4, tokens: int = 1) -> Path:
    """A Kimi Linear step of KDA layers (dense MLPs), imported through the CLI."""
    import json

    config = json.loads(KIMI_TINY.read_text())
    config["linear_attn_config"].update(head_dim=head_size, num_heads=heads, short_conv_kernel_size=conv)
    (tmp_path / "config.json").write_text(json.dumps(config))
    form_file = tmp_path / "model.mlir"
    result = CliRunner().invoke(main, ["import", str(tmp_path / "config.json"), "-o", str(form_file), "--layers", "3",
                                       "--kda-only", "--dense-mlp", "128", "--spec-tokens", str(tokens)])
    assert result.exit_code == 0, result.output
    return form_file


def compile_error(form_file: Path) -> str:
    result = CliRunner().invoke(main, ["compile", str(form_file), "-o", str(form_file.with_suffix(".bin"))])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize("shape, fact", [
    ({"head_size": 64, "heads": 16}, "KdaSplit head size 64: its 128 main threads hold a key and a value channel"),
    ({"conv": 3}, "KdaSplit conv width 3: the conv keeps 3 taps of state, so width must be 4"),
    ({"tokens": 9}, "KdaSplit supports 1-8 tokens per request; got 9"),
])
def test_a_held_back_kda_compiles_as_its_chain_and_explain_names_the_fact(tmp_path: Path, shape: dict, fact: str):
    """Held back, the kda's chain runs on the conv, head_norm, kda_gate and delta_rule kernels;
    `lanec explain` names the rule and the KdaSplit fact that split it."""
    form_file = imported_kda(tmp_path, **shape)
    compiled = CliRunner().invoke(main, ["compile", str(form_file), "-o", str(form_file.with_suffix(".bin"))])
    assert compiled.exit_code == 0, compiled.output
    explained = CliRunner().invoke(main, ["explain", str(form_file)])
    assert explained.exit_code == 0, explained.output
    assert "hold-kda" in explained.output and "kda split back into its chain: " + fact in explained.output


STEP = """\
form.step batch 1 tokens 1 {{
  %tokens = form.input {{role = "tokens"}} : tensor<1xi32>
  %table = form.weight {{name = "embed", format = "{table}"}} : tensor<32x64xbf16>
  %h = form.embed %tokens, %table : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
{body}}}
"""


@pytest.mark.parametrize("table, body, fact", [
    ("q8_0", "  form.return %h : tensor<1x64xbf16>\n",
     "no lane kernel for: form.embed (a q8_0 table: embed copies bf16 rows) x1"),
    ("bf16", "  %w = form.embed %tokens, %table : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>\n"
             "  %y = form.product %h, %w : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x1xbf16>\n"
             "  form.return %y : tensor<1x1xbf16>\n",
     "no lane kernel for: form.product (weights that are an activation: kernels load weights before the PDL "
     "wait) x1"),
])
def test_forms_no_kernel_takes_are_one_line_naming_the_fact(tmp_path: Path, table: str, body: str, fact: str):
    form_file = tmp_path / "step.mlir"
    form_file.write_text(STEP.format(table=table, body=body))
    load_module(form_file)  # the form verifies
    assert compile_error(form_file) == f"{form_file}: error: {fact}"
    explained = CliRunner().invoke(main, ["explain", str(form_file)])
    assert explained.exit_code == 0 and f"not lowered: {fact}" in explained.output, explained.output
