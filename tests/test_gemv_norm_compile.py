"""gemv with a norm prologue (fold-norm-into-gemv) compiles for sm_90a: the weights and the norm
weight are loaded before the PDL wait, the activation and residual after it, no local memory; and
the specializations it refuses say why."""

from __future__ import annotations

import re

import pytest
from ptx import compiled_for_sm90a

from lanec.codegen.kernels.attention import combine_lanes
from lanec.codegen.kernels.gemv import Gemv


@pytest.mark.parametrize("make", [
    lambda: Gemv(1, 2304, (4096, 4096, 4096, 128, 32, 128), norm=True, eps=1e-5, residual=True),
    lambda: Gemv(3, 1000, (1001,), norm=True, residual=True),
    lambda: Gemv(2, 2304, (2048,), norm=True, x_pitch=2560),
])
def test_norm_prologue_compiles_without_local_memory(make):
    kernel = make()
    ptx = compiled_for_sm90a(kernel).ptx
    before, after = ptx.split("griddepcontrol.wait;")
    # weight vectors and the norm weight in flight before the wait; x (and residual) after it
    assert before.count("ld.global") >= kernel.rows_per_cta * kernel.steps + kernel.steps
    assert "ld.global" in after and "bar.sync" in after
    names = [p.name for p in kernel.params()]
    assert names == (["x", "residual", "norm_w", "w", "y", "h"] if kernel.residual else ["x", "norm_w", "w", "y"])


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Gemv(4, 2304, (4096,), norm=True), "4 rows are above the 3 of the CUDA-core path"),
    (lambda: Gemv(3, 9216, (4096,), norm=True), "hold 15 vectors a thread, above the 8"),
    (lambda: Gemv(1, 2304, (4096,), residual=True), "a residual is added only by a norm prologue"),
    (lambda: Gemv(1, 2304, (4096,), norm=True, schedule={"tensor_cores": True}), "only on the CUDA cores"),
    (lambda: Gemv(3, 128, (512,), per_head=(8, 192, 64), norm=True), "the norm needs whole rows"),
])
def test_norm_prologue_refusals_say_why(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("make", [
    lambda: Gemv(1, 128, (16384,), per_head=(32, 192, 0), x_pitch=6720, rider_width=512, rider_x_pitch=6720,
                 schedule={"warps": 1, "rows_per_cta": 16, "tensor_cores": False}),
    lambda: Gemv(3, 128, (8192,), per_head=(16, 192, 0), rider_width=512,
                 schedule={"warps": 2, "rows_per_cta": 16, "tensor_cores": True}),
    lambda: Gemv(2, 1000, (1001,), rider_width=776, rider_eps=1e-5),
])
def test_a_norm_rides_in_a_cta_more_a_row(make):
    """The rider (fold-norm-into-latent): its input (read in place), weight and result after the product's
    tensors; one CTA more a row, whose first warp norms it after its own PDL wait, x through L2 only; the
    product's CTAs as without it; no local memory."""
    kernel = make()
    fields = ("rows", "width", "parts", "per_head", "x_pitch")
    alone = Gemv(**{name: getattr(kernel, name) for name in fields},
                 schedule={"warps": kernel.warps, "rows_per_cta": kernel.rows_per_cta,
                           "tensor_cores": kernel.tensor_cores})
    assert [p.name for p in kernel.params()] == [p.name for p in alone.params()] + ["rider_x", "rider_w", "rider_y"]
    rider_x = kernel.params()[-3]
    assert rider_x.strides == (kernel.rider_x_pitch or kernel.rider_width, 1) and kernel.params()[-1].written
    assert kernel.launch().grid == (alone.launch().grid[0] + kernel.rows, 1, 1)
    ptx = compiled_for_sm90a(kernel).ptx
    vectors = kernel.rider_width // 8
    assert ptx.count("ld.global.cg.v4.b32") == -(-vectors // 32)  # a lane's vectors of its row
    assert ptx.count("griddepcontrol.wait;") == compiled_for_sm90a(alone).ptx.count("griddepcontrol.wait;") + 1


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Gemv(1, 128, (512,), rider_width=4096), "width 4096: at most RIDER_MAX_WIDTH (2048)"),
    (lambda: Gemv(1, 128, (512,), rider_width=100), "width 100 must be a positive multiple of 8"),
    (lambda: Gemv(1, 128, (512,), rider_width=512, rider_x_pitch=500), "x pitch 500: at least the row's 512"),
    (lambda: Gemv(1, 128, (512,), rider_width=512, rider_eps=0.0), "eps must be positive"),
])
def test_rider_refusals_say_why(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


@pytest.mark.parametrize("splits, partials", [(16, "bfloat16"), (13, "float32"), (5, "bfloat16")])
def test_the_combine_prologue_merges_the_chunks_in_x_place(splits, partials):
    """gemv's combine prologue (LATENT_COMBINE_IN_GEMV): partial and lse in x's place, the launch as without it,
    every chunk's slice loaded after the PDL wait (a 16-byte load a bf16 slice, two a fp32 one; the lanes past the
    chunks read the last one again, as attention_combine's do), exp2 a chunk and a thread, no local memory."""
    kernel = Gemv(1, 512, (32 * 128,), per_head=(32, 512, 0), combine_splits=splits, combine_partials=partials,
                  schedule={"warps": 4, "rows_per_cta": 8, "tensor_cores": False})
    plain = Gemv(1, 512, (32 * 128,), per_head=(32, 512, 0), schedule={"warps": 4, "rows_per_cta": 8,
                                                                       "tensor_cores": False})
    params = kernel.params()
    assert [p.name for p in params] == ["partial", "lse", "w", "y"]
    assert (params[0].shape, params[0].dtype, params[1].shape) == ((splits, 1, 32, 512), partials, (splits, 1, 32))
    assert kernel.launch() == plain.launch()
    ptx = compiled_for_sm90a(kernel).ptx
    after = ptx.split("griddepcontrol.wait;")[1]
    loads = after.count("ld.global.v4.b32") if partials == "bfloat16" else after.count("ld.global.v4.f32")
    lanes, per_lane = combine_lanes(splits)  # attention_combine's lanes: past the chunks they read the last again
    assert loads == lanes * per_lane * (1 if partials == "bfloat16" else 2)
    assert ptx.count("ex2.approx") >= splits


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Gemv(1, 512, (4096,), per_head=(32, 512, 0), combine_splits=17), "splits 17: 2 to COMBINE_PROLOGUE"),
    (lambda: Gemv(1, 512, (4096,), combine_splits=8), "per_head (heads, 512, 0), unpitched"),
    (lambda: Gemv(4, 512, (4096,), per_head=(32, 512, 0), combine_splits=8), "only on the CUDA cores"),
    (lambda: Gemv(1, 512, (4096,), per_head=(32, 512, 0), combine_splits=8, combine_partials="int8"),
     "partials 'int8'"),
])
def test_combine_prologue_refusals_say_why(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()
