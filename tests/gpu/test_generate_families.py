"""`lanec generate` on each family's tiny model: the plan compiled on the CPU machine
(tests/gpu/tiny_models.py, into build/tiny/) decodes the chosen prompt greedily on the GPU, and the
tokens are the interpreter's (`lanec generate --interpret`, fp32) for the same checkpoint. A family
whose plan did not compile on the CPU machine (recorded in build/tiny/manifest.json; allowed only
where tiny_models.py says so) is skipped with the compiler's error."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loader import load

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
tiny = load("lanec_gpu_tiny_models", HERE / "tiny_models.py")


@pytest.fixture(scope="module")
def manifest() -> dict:
    import json

    if not tiny.MANIFEST.is_file():
        pytest.fail(f"{tiny.MANIFEST} is missing: run `python tests/gpu/tiny_models.py` (or tests/gpu/build.py) "
                    "on the CPU machine and carry build/", pytrace=False)
    return json.loads(tiny.MANIFEST.read_text())


def built(manifest: dict, family: str) -> dict:
    """The family's manifest entry, or a skip (a plan allowed not to compile yet) or a failure."""
    entry = manifest.get(family)
    if entry is None:
        pytest.fail(f"{family} is not in {tiny.MANIFEST}: rebuild it with python tests/gpu/tiny_models.py {family}",
                    pytrace=False)
    if not entry["compiled"]:
        assert not tiny.FAMILIES[family].compiles, f"{family} must compile; the build recorded: {entry['error']}"
        pytest.skip(f"{family} is not built: {entry['error']}")
    return entry


def first_difference(got: list[int], want: list[int]) -> str:
    index = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return f"token {index} differs: the GPU chose {got}, the interpreter {want}"


@pytest.mark.parametrize("family", list(tiny.FAMILIES))
def test_the_gpu_decodes_the_interpreters_tokens(family, manifest):
    from lanec.interp.generate import checkpoint_weights
    from lanec.interp.generate import generate as interpret
    from lanec.interp.program import Program
    from lanec.runtime import generate as gpu
    from lanec.runtime.plan import Plan
    from lanec.runtime.runner import Options, plan_sources

    entry = built(manifest, family)
    path, weights = ROOT / entry["plan"], ROOT / entry["weights"]
    plan = Plan.read(path)
    program = Program.from_json(plan.program)
    prompt, new = entry["prompt"], entry["new"]
    interpreted = interpret(program, checkpoint_weights(program, weights), prompt, new).tokens
    assert interpreted == entry["tokens"], (f"the interpreter here decodes {interpreted}, the CPU machine's "
                                            f"{entry['tokens']}: build/tiny is stale")
    for graph in (True, False):  # replayed as a CUDA graph, and launched eagerly
        decoded = gpu.generate(plan, program, plan_sources(plan, program, Options(weights=weights), path), prompt,
                               new, graph=graph)
        assert decoded.tokens == interpreted, first_difference(decoded.tokens, interpreted) + f" (graph {graph})"


def printed_tokens(*arguments: str) -> list[int]:
    """The tokens `lanec generate` prints (its `tokens:` line)."""
    environment = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "lanec.cli", "generate", *arguments], cwd=ROOT, text=True,
                            capture_output=True, env=environment, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    line = next((line for line in result.stdout.splitlines() if line.startswith("tokens:")), None)
    assert line is not None, f"no tokens: line in\n{result.stdout}"
    return [int(word) for word in line.split()[1:]]


@pytest.mark.parametrize("family", list(tiny.FAMILIES))
def test_lanec_generate_prints_the_same_tokens_as_generate_interpret(family, manifest):
    if importlib.util.find_spec("click") is None:
        pytest.skip("the lanec command line needs click, which this machine lacks (the decode itself is "
                    "compared by test_the_gpu_decodes_the_interpreters_tokens)")
    entry = built(manifest, family)
    arguments = [str(ROOT / entry["plan"]), "--weights", str(ROOT / entry["weights"]),
                 "--prompt-ids", ",".join(map(str, entry["prompt"])), "--max-new", str(entry["new"])]
    on_gpu = printed_tokens(*arguments)
    interpreted = printed_tokens(*arguments, "--interpret")
    assert interpreted == entry["tokens"]
    assert on_gpu == interpreted, first_difference(on_gpu, interpreted)
