"""Seeded weights (lanec.runtime.seeded) and the interpreter's lazy view of them (lanec.interp.lazy):
each value a pure function of (name, seed, index), whatever the chunking, the start or the threads,
matching the generator's definition written out here in plain Python integers; the distribution
the Source asks for; and a step run on lazy weights equal to the step on the materialised ones,
the mixture's experts and the embedding made only where chosen or read."""

from __future__ import annotations

import numpy as np
import pytest
from test_interp_program import DENSE, parse
from test_mixture_compile import MIXTURE

from lanec.codegen.plan_writer import weight_sources
from lanec.interp.environment import Environment, random_environment
from lanec.interp.lazy import LazyWeight
from lanec.interp.lower import program_of
from lanec.runtime import dtypes, seeded, weights
from lanec.runtime.plan import Plan, Source, WeightBinding


def defined(name: str, seed: int, index: int, scale: float, center: float) -> np.float32:
    """The module docstring's definition, one value, in Python integers and numpy fp32 scalars."""
    mask = (1 << 64) - 1
    h = 0xCBF29CE484222325
    for byte in name.encode():
        h = ((h ^ byte) * 0x100000001B3) & mask

    def mix(z: int) -> int:
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    key = mix((h + seed * 0x9E3779B97F4A7C15) & mask)
    n = (mix((key + index * 0x9E3779B97F4A7C15) & mask) >> 40) - (1 << 23)
    step = np.float32(scale * 3 ** 0.5) * np.float32(2.0 ** -23)
    return np.float32(np.float32(np.float32(n) * step) + np.float32(center))


def test_values_follow_the_definition():
    for start in (0, 12345, (1 << 40) + 7):
        got = seeded.values("model.layers.3.mlp.experts.*.w1.weight", 11, start, 40, 0.02, 0.0)
        want = [defined("model.layers.3.mlp.experts.*.w1.weight", 11, start + i, 0.02, 0.0) for i in range(40)]
        np.testing.assert_array_equal(got, np.array(want, np.float32))
    assert seeded.fnv1a64("") == 0xCBF29CE484222325 and seeded.fnv1a64("a") == 0xAF63DC4C8601EC8C  # FNV's own


def test_values_do_not_depend_on_chunks_starts_or_threads(monkeypatch):
    whole = seeded.values("w", 3, 0, 10_000, 0.5, 1.0, "bfloat16")
    monkeypatch.setattr(seeded, "CHUNK", 999)  # partial chunks, several threads
    monkeypatch.setattr(seeded, "THREADED", 0)
    for threads in (1, 4):
        np.testing.assert_array_equal(seeded.values("w", 3, 0, 10_000, 0.5, 1.0, "bfloat16", threads), whole)
    parts = [seeded.values("w", 3, a, b - a, 0.5, 1.0, "bfloat16") for a, b in ((0, 1), (1, 2500), (2500, 10_000))]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    np.testing.assert_array_equal(seeded.rows("w", 3, (100, 100), 37, 5, 0.5, 1.0, "bfloat16"),
                                  whole.reshape(100, 100)[37:42])
    np.testing.assert_array_equal(dtypes.round_bf16(whole), whole)


def test_names_and_seeds_give_other_streams():
    base = seeded.values("layers.0.w", 0, 0, 4096, 1.0, 0.0)
    for other in (seeded.values("layers.1.w", 0, 0, 4096, 1.0, 0.0), seeded.values("layers.0.w", 1, 0, 4096, 1.0, 0.0),
                  seeded.values("layers.0.w", 0, 1, 4096, 1.0, 0.0)):
        assert np.mean(base == other) < 0.01
        assert abs(np.corrcoef(base, other)[0, 1]) < 0.05


@pytest.mark.parametrize(("scale", "center"), [(1.0, 0.0), (0.02, 0.0), (0.1, 1.0), (0.5, -4.6)])
def test_a_large_draw_has_the_sources_mean_and_deviation(scale, center):
    drawn = seeded.values("model.embed_tokens.weight", 7, 0, 1 << 22, scale, center).astype(np.float64)
    assert abs(drawn.mean() - center) < 3e-3 * scale and abs(drawn.std() / scale - 1) < 2e-3
    assert np.all(np.abs(drawn - center) <= scale * 3 ** 0.5 * (1 + 1e-6))
    counts = np.histogram((drawn - center) / (scale * 3 ** 0.5), bins=16, range=(-1, 1))[0]
    assert np.all(np.abs(counts / counts.mean() - 1) < 0.01)  # uniform


def test_a_lazy_weight_indexes_like_the_array():
    lazy = LazyWeight.seeded("x", (5, 3, 4), 1, 0.5, 1.0, "bfloat16")
    whole = seeded.values("x", 1, 0, 60, 0.5, 1.0, "bfloat16").reshape(5, 3, 4)
    for index in (2, -1, np.int64(3), slice(1, 4), slice(None, None, 2), np.array([4, 0, 4]), [1, 2], (2, 1),
                  (slice(0, 2), 1, 3), (np.array([[1], [3]]), 0)):
        np.testing.assert_array_equal(lazy[index], whole[index])
    assert lazy.generated == 1 + 1 + 1 + 3 + 3 + 2 + 2 + 1 + 2 + 2
    np.testing.assert_array_equal(np.asarray(lazy), whole)
    with pytest.raises(IndexError):
        lazy[5]


def lazy_and_materialised(text: str, seed: int = 4):
    """The step's program, an environment on materialised seeded weights, and the same with each
    weight a lazy view of the same source."""
    program = program_of(parse(text))
    sources = weight_sources(program)
    env = random_environment(program, seed, weights={n: weights.random_source(s, seed) for n, s in sources.items()})
    views = {n: LazyWeight.seeded(n, s.shape, seed, s.scale, s.center, s.dtype) for n, s in sources.items()}
    lazy = Environment({k: v.copy() for k, v in env.inputs.items()}, views, {k: v.copy() for k, v in env.states.items()})
    return program, env, lazy


@pytest.mark.parametrize("text", [MIXTURE.replace("TOP_K", "2"), DENSE], ids=["mixture", "dense_q8_0"])
def test_a_step_on_lazy_weights_equals_the_step_on_materialised_ones(text):
    program, env, lazy = lazy_and_materialised(text)
    want = program.run(env, storage=True)
    got = program.run(lazy, storage=True)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    for name, state in env.states.items():
        np.testing.assert_array_equal(lazy.states[name], state)


def test_the_mixture_makes_only_the_chosen_experts():
    program, _, lazy = lazy_and_materialised(MIXTURE.replace("TOP_K", "2"))
    program.run(lazy)
    views = lazy.weights
    for which in ("w1", "w3", "w2"):
        experts = views[f"model.layers.1.moe.experts.*.{which}.weight"]
        assert 1 <= experts.generated <= program.batch * 2 < experts.shape[0]  # 3 rows, top 2 of 16
    assert 1 <= views["embed"].generated <= program.batch < views["embed"].shape[0]  # the tokens' rows
    router = views["model.layers.1.moe.gate.weight"]
    assert router.generated == router.shape[0]  # a product reads it whole


def test_sources_can_be_lazy():
    plan = Plan(weights=[WeightBinding("w", [Source("layer.0.w", (6, 4), "bfloat16", 0.5, 1.0)])])
    lazy = weights.sources(plan, 9, lazy=True)["layer.0.w"]
    assert isinstance(lazy, LazyWeight) and lazy.shape == (6, 4)
    np.testing.assert_array_equal(np.asarray(lazy), weights.sources(plan, 9)["layer.0.w"])
