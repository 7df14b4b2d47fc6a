"""`lanec opt`: print, parse, print is a fixed point for every example and for a module of our
own; its arguments reach xdsl-opt unchanged (-p, -t, -o, --split-input-file, stdin)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from lanec.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.mlir"))

# A small Qwen3-Next-like layer: gated attention next to a Gated DeltaNet, then a mixture.
MODULE = """\
form.step batch 1 tokens 1 {
  %tokens = form.input {role = "tokens"} : tensor<1xi32>
  %positions = form.input {role = "positions"} : tensor<1xi32>
  %slots = form.input {role = "slots"} : tensor<1xi32>
  %table = form.weight {name = "embed", format = "bf16"} : tensor<64x64xbf16>
  %ln = form.weight {name = "input_layernorm", format = "bf16"} : tensor<64xbf16>
  %wq = form.weight {name = "q_proj", format = "q8_0"} : tensor<64x64xbf16>
  %wb = form.weight {name = "b_proj", format = "bf16"} : tensor<2x64xbf16>
  %alog = form.weight {name = "A_log", format = "bf16"} : tensor<2xf32>
  %dtb = form.weight {name = "dt_bias", format = "bf16"} : tensor<2xf32>
  %state = form.state {name = "gdn", kind = "recurrent"} : tensor<2x2x32x32xf32>
  %h = form.embed %tokens, %table : (tensor<1xi32>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
  %x = form.norm %h, %ln {eps = 1.0e-06 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
  %q, %b = form.product %x, %wq, %wb : (tensor<1x64xbf16>, tensor<64x64xbf16>, tensor<2x64xbf16>) -> (tensor<1x64xbf16>, tensor<1x2xbf16>)
  %r = form.rope %q, %positions {heads = 2 : i64, rotary = 16 : i64, theta = 1.0e+07 : f64} : (tensor<1x64xbf16>, tensor<1xi32>) -> tensor<1x64xbf16>
  %g = form.kda_gate %b, %alog, %dtb {heads = 2 : i64, form = "softplus"} : (tensor<1x2xbf16>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2xf32>
  %beta = form.sigmoid %b : (tensor<1x2xbf16>) -> tensor<1x2xbf16>
  %o = form.delta_rule %r, %r, %x, %g, %beta, %state, %slots {heads = 2 : i64, key_heads = 2 : i64, scale = 0.17677669529663687 : f64} : (tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x2xf32>, tensor<1x2xbf16>, tensor<2x2x32x32xf32>, tensor<1xi32>) -> tensor<1x64xbf16>
  %unused = form.silu %o : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
  %next = form.argmax %o : (tensor<1x64xbf16>) -> tensor<1xi32>
  form.return %next : tensor<1xi32>
}
"""


def opt(*args: str, input: str | None = None) -> str:
    result = CliRunner().invoke(main, ["opt", *args], input=input)
    assert result.exit_code == 0, result.stderr or repr(result.exception)
    return result.stdout


def assert_fixed_point(path: Path) -> str:
    printed = opt(str(path))
    assert opt(input=printed) == printed
    # The generic form parses back to the same module too.
    assert opt(input=opt(str(path), "--print-op-generic")) == printed
    return printed


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_round_trips(example: Path):
    printed = assert_fixed_point(example)
    assert "form.step" in printed


def test_our_module_round_trips(tmp_path: Path):
    path = tmp_path / "layer.mlir"
    path.write_text(MODULE)
    printed = assert_fixed_point(path)
    lines = [line.strip() for line in printed.splitlines()]
    assert lines[0] == "builtin.module {"
    assert lines[1] == "form.step batch 1 tokens 1 {"
    # Printed as written, but for the spelling of short floats (a long one keeps every digit).
    expected = MODULE.replace("1.0e-06", "1.000000e-06").replace("1.0e+07", "1.000000e+07")
    assert lines[2:-2] == [line.strip() for line in expected.splitlines()][1:]


def test_passes_are_forwarded(tmp_path: Path):
    path = tmp_path / "layer.mlir"
    path.write_text(MODULE)
    printed = opt(str(path), "-p", "dce")
    # dce drops the unused pure op and nothing else.
    assert "%unused" not in printed
    assert printed.count("\n") == opt(str(path)).count("\n") - 1


def test_split_input_file_and_output_file(tmp_path: Path):
    path = tmp_path / "two.mlir"
    second = MODULE.replace("batch 1 tokens 1", "batch 1 tokens 1 attributes {n = 2}")
    path.write_text(MODULE + "// -----\n" + second)
    out = tmp_path / "out.mlir"
    assert opt(str(path), "--split-input-file", "-o", str(out)) == ""
    chunks = out.read_text().split("// -----\n")
    assert len(chunks) == 2
    assert "attributes {n = 2 : i64}" in chunks[1] and "attributes" not in chunks[0]


def test_targets_and_help_come_from_xdsl():
    help_text = opt("--help")
    assert help_text.startswith("usage: lanec opt")
    assert "--verify-diagnostics" in help_text and "--split-input-file" in help_text
    result = CliRunner().invoke(main, ["opt", "-t", "no-such-target"], input=MODULE)
    assert result.exit_code == 2
    assert "invalid choice: 'no-such-target'" in result.stderr


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no-such-pass", "Error: -p no-such-pass: Unrecognized passes: ['no-such-pass']"),
        ("dce{x=1}", 'Error: -p dce{x=1}: Provided arguments ["x"] not found in expected arguments []'),
        ("dce{x=1", "Error: -p dce{x=1: Malformed pass arguments, expected either a space or `}` here"),
    ],
)
def test_a_bad_pass_pipeline_is_one_line(spec: str, message: str):
    result = CliRunner().invoke(main, ["opt", "-p", spec], input=MODULE)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [message]


@dataclass(frozen=True)
class Refuse(ModulePass):
    name = "refuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise PassFailedException("the lane has no kernel for this")


def test_a_failing_pass_is_one_line(monkeypatch: pytest.MonkeyPatch):
    import lanec.tools.opt_main

    monkeypatch.setattr(lanec.tools.opt_main, "get_all_passes", lambda: {"refuse": lambda: Refuse})
    result = CliRunner().invoke(main, ["opt", "-p", "refuse"], input=MODULE)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["stdin: error: the lane has no kernel for this"]
    # --verify-diagnostics keeps xDSL's behaviour: the message on stdout, exit 0.
    result = CliRunner().invoke(main, ["opt", "-p", "refuse", "--verify-diagnostics"], input=MODULE)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "the lane has no kernel for this"
