"""KdaSplit compiles for sm_90a (CPU only) and its PTX has what the kernel claims: the PDL pair,
the cluster barrier, mbarriers, DSMEM sends (st.async), the bf16 MMA of the F_B projection (gate
modes 0 and 1) and the bulk state copy (early 2/3); the specializations the seed rules out raise
ValueError; the launch facts and the parameter list agree with the kernel.

A representative handful compiles by default; the sweep of every schedule x gate mode x gate
form x tokens combination the seed allows runs with LANEC_SLOW=1 (it is marked `slow`)."""

from __future__ import annotations

import itertools
import os

import pytest

from lanec.codegen.compile import compile_kernel
from lanec.codegen.kernels.kda_split import KdaSplit

ALWAYS = ("griddepcontrol.wait", "griddepcontrol.launch_dependents", "barrier.cluster", "mbarrier",
          "st.async")


def check_ptx(kernel: KdaSplit, ptx: str) -> None:
    for instruction in ALWAYS:
        # one CTA a head launches without a cluster: no cluster barrier, no DSMEM
        present = instruction in ptx
        if kernel.local and instruction in ("barrier.cluster", "st.async"):
            assert not present, f"{instruction} in a kernel launched without a cluster"
        else:
            assert present, f"{instruction} missing from the PTX"
    assert ("mma.sync" in ptx) == (kernel.gate_mode != 2)
    assert ("cp.async.bulk" in ptx) == kernel.staged
    assert ("cp.async.cg" in ptx) == kernel.gate_staged
    assert ".local" not in ptx, "registers spilled to local memory (a run-time register index?)"


REPRESENTATIVE = [
    dict(heads=4, batch=2, gate_mode=0, has_bias=False),
    dict(heads=32, batch=1, gate_mode=0, has_bias=False),
    dict(heads=12, batch=64, gate_mode=1, has_bias=True, gate_form="softplus"),
    dict(heads=8, batch=3, gate_mode=0, has_bias=True, tokens=4),
    dict(heads=8, batch=17, gate_mode=2, has_bias=False),
    dict(heads=8, batch=128, gate_mode=0, has_bias=False, schedule=(2, 0, 0, 2, 1)),
    dict(heads=8, batch=128, gate_mode=0, has_bias=False, schedule=(3, 0, 0, 2)),
    dict(heads=4, batch=2, gate_mode=1, has_bias=False, tokens=3, schedule=(1, 0, 0, 1)),
]


@pytest.mark.parametrize("args", REPRESENTATIVE, ids=lambda a: "-".join(f"{k}{v}" for k, v in a.items()))
def test_compiles(args, tmp_path):
    kernel = KdaSplit(**args)
    compiled = compile_kernel(kernel, cache_dir=tmp_path)
    check_ptx(kernel, compiled.ptx)
    assert compiled.cubin[:4] == b"\x7fELF"
    assert compiled.launch == kernel.launch()


def test_launch_and_params():
    kernel = KdaSplit(8, 3, 0, True, tokens=2, x_pitch=3 * 1024 + 64)
    shape = kernel.launch()
    assert shape.grid == (4, 8, 3) and shape.block == (160, 1, 1) and shape.cluster == (4, 1, 1)
    assert shape.pdl
    # q, k, decay, o: 128 floats a token; v: 32 rows a token; 8 reductions a token; 1 + 1 barriers
    assert shape.shared_bytes == 4 * 2 * (4 * 128 + 32 + 8) + 8 + 8
    names = [p.name for p in kernel.params()]
    assert names == ["x", "conv_weight", "conv_bias", "conv_state", "raw_gate", "beta", "a_log", "dt_bias",
                     "slots", "state", "output", "output_gate", "norm_weight", "f_b_weight", "accepted"]
    params = {p.name: p for p in kernel.params()}
    assert params["x"].shape == (6, 3 * 1024) and params["x"].strides == (3 * 1024 + 64, 1)
    assert params["conv_state"].shape == (7, 3 * 1024, 4) and params["conv_state"].written
    assert params["slots"].shape == (3, 2) and params["state"].shape == (7, 8, 128, 128)
    assert [p.name for p in KdaSplit(4, 2, 0, False).params()][-1] == "f_b_weight"
    staged = KdaSplit(8, 128, 0, False, schedule=(2, 0, 0, 1)).launch()
    assert staged.shared_bytes >= 128 * 512


@pytest.mark.parametrize("args, match", [
    (dict(tokens=0), "1-8 tokens"),
    (dict(tokens=9), "1-8 tokens"),
    (dict(gate_mode=3), "gate_mode"),
    (dict(gate_form="tanh"), "gate_form"),
    (dict(gate_mode=2, schedule=(1, 0, 0)), "gate_mode 2"),
    (dict(gate_mode=2, schedule=(0, 0, 0, 4)), "gate_mode 2"),
    (dict(tokens=2, schedule=(2, 0, 0)), "speculative"),
    (dict(tokens=2, gate_mode=2), "speculative"),
    (dict(tokens=2, schedule=(0, 0, 0, 16)), "speculative"),
    (dict(schedule=(3, 0, 0, 4)), "64 rows"),
    (dict(schedule=(1, 0, 0, 0, 1)), "evict"),
    (dict(schedule=(0, 0, 0, 3)), "1, 2, 4, 8 or 16"),
    (dict(schedule=(0, 12, 0)), "lanes"),
    (dict(schedule=(4, 0, 0)), "early"),
    (dict(x_pitch=100), "x_pitch"),
])
def test_rejects(args, match):
    base = dict(heads=4, batch=2, gate_mode=0, has_bias=False)
    with pytest.raises(ValueError, match=match):
        KdaSplit(**{**base, **args})


def allowed_combinations():
    """Every schedule x gate mode x gate form x tokens that the constructor accepts: early x
    cluster x evict at the default lanes a row (8 at batch 2) across every gate mode, gate form
    and token count; then each other lanes a row (4, 16, 32: it shapes only the state rows'
    update, the gate warp never sees it) across early x cluster x evict at one and eight tokens.
    The minimum CTAs a SM only bounds the registers (test_every_table_schedule_compiles)."""
    def accepted(*args):
        try:
            return KdaSplit(*args)
        except ValueError:
            return None

    combos = [(4, 2, mode, tokens % 2 == 0, (early, 0, 0, cluster, evict), tokens, form)
              for early, cluster, evict, mode, form, tokens in itertools.product(
                  range(4), (0, 1, 2, 4, 8, 16), (0, 1), range(3), ("lower_bound", "softplus"), (1, 2, 5, 8))]
    combos += [(4, 2, 0, False, (early, lanes, 0, cluster, evict), tokens, "lower_bound")
               for lanes, early, cluster, evict, tokens in itertools.product(
                   (4, 16, 32), range(4), (0, 1, 2, 4, 8, 16), (0, 1), (1, 8))]
    return [kernel for kernel in (accepted(*c) for c in combos) if kernel is not None]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("LANEC_SLOW"), reason="the exhaustive sweep: set LANEC_SLOW=1")
@pytest.mark.parametrize("kernel", allowed_combinations(),
                         ids=lambda k: f"e{int(k.early) + k.staged + k.gate_staged}-l{k.lanes_per_row}"
                                       f"-c{k.cluster}-ev"
                                       f"{int(k.evict)}-m{k.gate_mode}-{k.gate_form}-t{k.tokens}")
def test_sweep(kernel, tmp_path):
    check_ptx(kernel, compile_kernel(kernel, cache_dir=tmp_path).ptx)


def table_entries():
    """(heads, batch, tokens, schedule) of every kda_split entry the compiler's table holds."""
    from lanec.codegen.schedules import table

    for key, entry in sorted(table().get("kda_split", {}).items()):
        shape = dict(part.split("=") for part in key.split(","))
        yield int(shape["heads"]), int(shape["batch"]), int(shape["tokens"]), tuple(entry["schedule"])


@pytest.mark.parametrize("heads, batch, tokens, schedule", list(table_entries()),
                         ids=lambda v: "-".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_every_table_schedule_compiles(heads, batch, tokens, schedule, tmp_path):
    """What the autotuner wrote is what the compiler will launch: each entry compiles, with the
    PTX the kernel claims and no register spills."""
    kernel = KdaSplit(heads, batch, 0, False, schedule, tokens)
    check_ptx(kernel, compile_kernel(kernel, cache_dir=tmp_path).ptx)
