"""Build build/plans/dense-small-q8-noattnq.plan: the shipped q8_0 dense example with the attention's
quantize epilogue held back (hold-quantized-activation's attention check made to fail), so that the
standalone quantize launch it replaces can be timed against it (tests/gpu/session.sh attn-quant)."""

from __future__ import annotations

from pathlib import Path

import lanec.passes.hold_quantized_activation as hold
from lanec.cli import main
from lanec.dialects.form import AttentionOp

ROOT = Path(__file__).resolve().parents[2]
checks = hold.epilogue_checks


def held(op, shim):
    found = checks(op, shim)
    return found + [(False, "held back for the A/B")] if isinstance(op, AttentionOp) else found


hold.epilogue_checks = held
main(["compile", str(ROOT / "examples" / "dense-small-q8.mlir"), "-o",
      str(ROOT / "build" / "plans" / "dense-small-q8-noattnq.plan")], standalone_mode=False)
