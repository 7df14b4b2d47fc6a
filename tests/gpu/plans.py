"""Whole plans for the GPU: shipped examples compiled here by `build()` into build/plans/, run
there by tests/gpu/test_plans.py with `--check` (every output and state against the interpreter).

    python tests/gpu/plans.py [NAME ...]      # here, before carrying build/ to the GPU machine
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "plans"
KIMI = ROOT / "examples" / "kimi-linear-48b-a3b.config.json"
# The KDA-only variant of Kimi Linear (dense MLPs in place of the mixtures): two KDA layers
# keep the GPU check quick while exercising the layer-to-layer chain.
KDA = ["--kda-only", "--dense-mlp", "9216", "--layers", "2"]

# name -> the `lanec import` arguments of its form (None: a shipped form file)
PLANS: dict[str, list[str] | None] = {
    "dense-small": None,
    "kimi-kda-b1": [*KDA, "--batch", "1"],
    "kimi-kda-b64": [*KDA, "--batch", "64"],
    "kimi-kda-b256": [*KDA, "--batch", "256"],
    "kimi-kda-spec3": [*KDA, "--batch", "4", "--spec-tokens", "3"],
}


def lanec(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "lanec.cli", *args], check=True, cwd=ROOT)


def build(names: list[str] | None = None) -> list[Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    built = []
    for name in names or list(PLANS):
        arguments = PLANS[name]
        if arguments is None:
            source = ROOT / "examples" / f"{name}.mlir"
        else:
            source = OUT / f"{name}.mlir"
            lanec("import", str(KIMI), *arguments, "-o", str(source))
        target = OUT / f"{name}.plan"
        lanec("compile", str(source), "-o", str(target))
        built.append(target)
    return built


if __name__ == "__main__":
    for path in build(sys.argv[1:] or None):
        print(path)
