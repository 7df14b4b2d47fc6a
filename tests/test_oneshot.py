"""The one-shot all-reduce (lanec/runtime/peer.py, lanec/codegen/kernels/all_reduce.py) on the CPU:
the facts that keep an all-reduce on NCCL, the region layout both sides compute, the peer table's
words, and the kernel's PTX: system-scope release and acquire around the flags, L2-only reads of
the peers' memory, no local memory. On the GPU: tests/gpu/test_tp_nccl.py (both engines)."""

from __future__ import annotations

import numpy as np
import pytest

from lanec.runtime.peer import ONESHOT_MAX_BYTES, ONESHOT_MAX_CTAS, ONESHOT_THREADS, PeerLayout, table


@pytest.mark.parametrize("count, dtype, ranks, problem", [
    (2048, "int32", 2, "sums int32"),
    (2048, "bfloat16", 1, "1 ranks"),
    (2048, "bfloat16", 9, "9 ranks"),
    (2047, "bfloat16", 2, "not whole 16-byte vectors"),
    (ONESHOT_MAX_BYTES // 2 + 8, "bfloat16", 2, "pass the one-shot's limit"),
])
def test_an_all_reduce_the_one_shot_cannot_take_names_why(count, dtype, ranks, problem):
    problems = PeerLayout(count, dtype, ranks).problems()
    assert len(problems) == 1 and problem in problems[0]


@pytest.mark.parametrize("count, dtype, ranks", [(8, "bfloat16", 2), (2304, "bfloat16", 2), (147456, "bfloat16", 8),
                                                 (1000, "float32", 4), (ONESHOT_MAX_BYTES // 4, "float32", 3)])
def test_the_regions_hold_two_halves_then_flags_then_epochs(count, dtype, ranks):
    layout = PeerLayout(count, dtype, ranks)
    assert not layout.problems()
    assert layout.flags == 2 * layout.bytes and layout.epoch >= layout.flags + 4 * layout.ctas * ranks
    assert layout.total >= layout.epoch + 4 * layout.ctas and layout.total % 16 == layout.epoch % 16 == 0
    assert 1 <= layout.ctas <= ONESHOT_MAX_CTAS
    assert layout.ctas * ONESHOT_THREADS >= layout.vectors or layout.ctas == ONESHOT_MAX_CTAS


def test_the_peer_table_is_the_rank_then_each_region_in_two_words():
    rng = np.random.default_rng()
    bases = [int(b) & ~0xF for b in rng.integers(1 << 40, 1 << 47, size=4)]
    words = table(3, bases).view(np.uint32)
    assert words[0] == 3 and words[1] == 0 and len(words) == 2 * (len(bases) + 1)
    assert [int(lo) | int(hi) << 32 for lo, hi in zip(words[2::2], words[3::2])] == bases


@pytest.mark.parametrize("count, dtype, ranks", [(2048, "bfloat16", 2), (147456, "bfloat16", 4), (1000, "float32", 8)])
def test_the_kernel_orders_its_flags_at_system_scope(count, dtype, ranks):
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.all_reduce import OneShotAllReduce

    compiled = compile_kernel(OneShotAllReduce(count, dtype, ranks))
    ptx = compiled.ptx
    assert ptx.count("fence.acq_rel.sys") == 1 and ptx.count("st.release.sys.global.u32") == 1
    assert ptx.count("ld.acquire.sys.global.s32") == 1  # the spin, once
    per_thread = -(-PeerLayout(count, dtype, ranks).vectors // (compiled.launch.grid[0] * ONESHOT_THREADS))
    # the epoch, each vector staged, and each rank's vector summed: all through L2 only
    assert ptx.count("ld.global.cg") == 1 + per_thread * (1 + ranks)
    assert "griddepcontrol.wait" in ptx and ".local" not in ptx
    assert compiled.launch.grid[0] == PeerLayout(count, dtype, ranks).ctas and compiled.launch.pdl


def test_rows_give_each_cta_a_row_and_its_flags():
    """all_reduce_norm's layout (`rows`): a CTA, a flag row and an epoch a row; rows of whole vectors."""
    layout = PeerLayout(3 * 2304, "bfloat16", 4, rows=3)
    assert layout.ctas == 3 and layout.total == layout.epoch + 16 and layout.epoch == layout.flags + 48
    assert PeerLayout(3 * 2304, "bfloat16", 4).ctas == 2  # chunks of 512 vectors otherwise
    assert any("are not 3 rows of whole 16-byte vectors" in p for p in PeerLayout(3 * 20, "bfloat16", 2, rows=3).problems())
    assert any("are not 4 rows" in p for p in PeerLayout(30, "bfloat16", 2, rows=4).problems())


@pytest.mark.parametrize("rows, width, ranks, residual", [(1, 2304, 2, True), (5, 7168, 4, True), (3, 1000, 8, False)])
def test_the_fused_norm_orders_its_flags_at_system_scope(rows, width, ranks, residual):
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.all_reduce import AllReduceNorm
    from lanec.codegen.kernels.rmsnorm import RmsNorm

    kernel = AllReduceNorm(rows, width, 1e-6, ranks, residual)
    compiled = compile_kernel(kernel)
    ptx = compiled.ptx
    assert ptx.count("fence.acq_rel.sys") == 1 and ptx.count("st.release.sys.global.u32") == 1
    assert ptx.count("ld.acquire.sys.global.s32") == 1
    # the epoch, then each of a thread's vectors staged and summed from every rank: through L2 only
    assert ptx.count("ld.global.cg") == 1 + kernel.steps * (1 + ranks)
    assert "griddepcontrol.wait" in ptx and "griddepcontrol.launch_dependents" in ptx and ".local" not in ptx
    assert compiled.launch == RmsNorm(rows, width, 1e-6, residual).launch()  # the norm's CTAs: a row each
    assert [p.name for p in kernel.params()] == ["source", *(["residual"] if residual else []), "w", "y",
                                                 *(["h"] if residual else []), "peers"]
