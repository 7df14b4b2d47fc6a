"""bench/router_chain.py's launches (CPU): each variant compiles at Kimi Linear's batch-1 router shape with the
grid its row names, and each probe takes out only its stage: what the table's differences measure."""

from __future__ import annotations

import pytest
from bench_scripts import compiled_bench


@pytest.fixture(scope="module")
def compiled():
    yield from compiled_bench("router_chain")


def test_every_variant_compiles_with_its_cluster(compiled):
    assert compiled["whole"].launch.grid == (16, 1, 1) and compiled["whole"].launch.cluster == (16, 1, 1)
    assert compiled["split 8"].launch.cluster == (8, 1, 1) and compiled["split 8"].launch.block == (1024, 1, 1)
    assert compiled["split 4"].launch.grid == (4, 1, 1) and compiled["split 2"].launch.cluster == (2, 1, 1)
    assert compiled["spread"].launch.grid == (576, 1, 1)
    assert all(".local" not in c.ptx for c in compiled.values())


def test_each_probe_takes_out_its_stage_only(compiled):
    whole, no_choose, no_exchange = (compiled[s].ptx for s in ("whole", "no-choose", "no-exchange"))
    assert whole.count("redux.sync.max.s32") == 8 and "redux.sync" not in no_choose
    assert "st.async.shared::cluster" in whole and "st.async" not in no_exchange
    assert no_exchange.count("redux.sync.max.s32") == 8 and "st.async.shared::cluster" in no_choose
    assert "rsqrt" in whole and "rsqrt" not in compiled["no-norm"].ptx
    assert "redux.sync" not in compiled["no-rounds"].ptx and "ex2.approx" in compiled["no-rounds"].ptx
    assert compiled["no-sigmoid"].ptx.count("ex2.approx") < whole.count("ex2.approx")
    assert compiled["no-sigmoid"].ptx.count("redux.sync.max.s32") == 8
