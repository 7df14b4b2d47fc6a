"""The published DeepSeek-V3 and Llama-3.1-8B configs, sized down with --layers, compile to plans on
this (GPU-less) machine: their ropes (YaRN on DeepSeek's interleaved rope part, llama3 on Llama's
whole heads) are launched with the form's scaling, DeepSeek's first dense layers and its first
mixture layer both appear, and every launch's kernel is built."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.pipeline import compile_plan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("lanec-cache")


def compiled(tmp_path: Path, config: str, *arguments: str, cache: Path):
    source = tmp_path / "step.mlir"
    result = CliRunner().invoke(main, ["import", str(EXAMPLES / config), *arguments, "-o", str(source)])
    assert result.exit_code == 0, result.output
    return compile_plan(source, cache_dir=cache).plan


def test_deepseek_v3_four_layers_compile_with_yarn_rope_on_the_interleaved_rope_part(tmp_path, cache):
    plan = compiled(tmp_path, "deepseek-v3.config.json", "--layers", "4", "--batch", "2", cache=cache)
    ropes = [launch.spec for launch in plan.launches if launch.spec.get("rotary")]
    assert len(ropes) == 8  # the query's and the shared key's, a layer
    for spec in ropes:
        assert spec["scaling"]["kind"] == "yarn" and spec["scaling"]["factor"] == 40.0
        assert spec["interleaved"] and spec["rotary"] == 64 and spec["rows"] == 2
    queries = [spec for spec in ropes if spec["heads"] == 128]
    assert len(queries) == 4 and all(spec["offset"] == 128 and spec["unit"] == 192 for spec in queries)
    kernels = [launch.name.split()[0] for launch in plan.launches]  # a launch's label starts with its kernel
    # three dense layers (first_k_dense_replace 3: a gated product), then the first mixture layer
    assert kernels.count("gated_gemv") == 3
    assert [kernels.count(k) for k in ("mixture_router", "mixture_gated", "mixture_down")] == [1, 1, 1]
    assert kernels.count("latent_attention") + kernels.count("expanded_attention") == 4


def test_llama_3_1_two_layers_compile_with_llama3_rope(tmp_path, cache):
    plan = compiled(tmp_path, "llama-3.1-8b.config.json", "--layers", "2", "--batch", "3", cache=cache)
    ropes = [launch.spec for launch in plan.launches if launch.spec.get("rotary")]
    assert len(ropes) == 2  # q and k, a layer, paired in one launch (adjacent parts of the merged product)
    for spec in ropes:
        assert spec["scaling"] == {"kind": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_context": 8192}
        assert spec["rotary"] == spec["unit"] == 128 and "offset" not in spec and "interleaved" not in spec
    assert [spec["heads"] for spec in ropes] == [32 + 8, 32 + 8] and all(s["x_pitch"] == 6144 for s in ropes)
