"""bench/launch_floor.py's kernels (CPU): every chain's launch compiles, the tail draws the grid's ticket
between fences before its norm, and a hop released at its entry calls launch_dependents before its PDL wait
(after it where released at its wait): what the chains' rows are measuring."""

from __future__ import annotations

import pytest
from bench_scripts import compiled_bench


@pytest.fixture(scope="module")
def compiled():
    yield from compiled_bench("launch_floor")


def test_every_chain_launch_compiles_with_the_grid_it_names(compiled):
    assert compiled["hop_g6288"].launch.grid == (6288, 1, 1) and compiled["hop_g1"].launch.grid == (1, 1, 1)
    assert compiled["spread"].launch.grid == compiled["spread_tail"].launch.grid == (576, 1, 1)
    assert not compiled["hop_g576_nopdl"].launch.pdl and compiled["hop_g576"].launch.pdl
    assert all("local" not in c.ptx.split(".entry")[1] for c in compiled.values())


def test_the_tail_draws_a_ticket_between_fences_and_only_the_tail_does(compiled):
    tail, alone = compiled["spread_tail"].ptx, compiled["spread"].ptx
    assert "atom.global.inc.u32" in tail and tail.count("fence.acq_rel.gpu") >= 3
    assert "atom.global" not in alone
    assert "rsqrt.approx" in tail  # the norm's arithmetic is the tail's


@pytest.mark.parametrize("stem, first", [("hop_g576_entry", "launch_dependents"), ("hop_g576", "wait")])
def test_a_hop_releases_its_dependents_where_its_release_point_says(compiled, stem, first):
    ptx = compiled[stem].ptx
    release, wait = ptx.index("griddepcontrol.launch_dependents"), ptx.index("griddepcontrol.wait")
    assert (release < wait) == (first == "launch_dependents")


def test_each_cluster_hop_has_its_twin_without_clusters(compiled):
    from launch_floor import CLUSTER_HOPS

    for ctas, cluster, threads in CLUSTER_HOPS:
        plain, clustered = compiled[f"hop_g{ctas}_t{threads}"].launch, compiled[f"hop_g{ctas}_t{threads}_c{cluster}"].launch
        assert plain.grid == clustered.grid == (ctas, 1, 1) and plain.block == clustered.block == (threads, 1, 1)
        assert plain.cluster == (1, 1, 1) and clustered.cluster == (cluster, 1, 1)
