"""KdaSplit compiles for sm_90a (CPU only) and its PTX has what the kernel claims: the PDL pair,
the cluster barrier, mbarriers, DSMEM sends (st.async), the bf16 MMA of the F_B projection (gate
modes 0 and 1) and the bulk state copy (early 2/3); the specializations the seed rules out raise
ValueError naming the limit; schedules are named knobs over the shape's defaults; the launch facts and
the parameter list agree with the kernel.

A representative handful compiles by default; the sweep of every schedule x gate mode x gate
form x tokens combination the seed allows runs with LANEC_SLOW=1 (it is marked `slow`)."""

from __future__ import annotations

import itertools
import os

import pytest

from lanec.codegen.compile import compile_kernel
from lanec.codegen.facts import KdaSchedule, KdaSplitSpec
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
    # F_B's decays by MMA but in gate_mode 2; the folded output gate by MMA in the gate warp
    assert ("mma.sync" in ptx) == (kernel.gate_mode != 2 or kernel.gate_in_warp)
    assert ("cp.async.bulk" in ptx.replace("cp.async.bulk.prefetch", "")) == kernel.staged
    assert ("cp.async.cg" in ptx) == kernel.gate_staged
    # the folded gate's rows into L2 before the wait, but where the gate warp holds them in registers
    assert ("cp.async.bulk.prefetch.L2" in ptx) == (kernel.gate_folded and not kernel.gate_preloaded)
    assert ".local" not in ptx, "registers spilled to local memory (a run-time register index?)"


REPRESENTATIVE = [
    dict(heads=4, batch=2, gate_mode=0, has_bias=False),
    dict(heads=32, batch=1, gate_mode=0, has_bias=False),
    dict(heads=12, batch=64, gate_mode=1, has_bias=True, gate_form="softplus"),
    dict(heads=8, batch=3, gate_mode=0, has_bias=True, tokens=4),
    dict(heads=8, batch=17, gate_mode=2, has_bias=False),
    dict(heads=8, batch=128, gate_mode=0, has_bias=False, schedule={"early": 2, "cluster": 2, "evict": True}),
    dict(heads=8, batch=128, gate_mode=0, has_bias=False, schedule={"early": 3, "cluster": 2}),
    dict(heads=4, batch=2, gate_mode=1, has_bias=False, tokens=3, schedule={"early": 1, "cluster": 1}),
    # the output gate's product folded (fold-gate-product): Kimi Linear's batch 1, its g_a read in place
    dict(heads=32, batch=1, gate_mode=0, has_bias=False, gate_form="softplus", gate_rank=128, gate_pitch=12576),
    dict(heads=8, batch=3, gate_mode=0, has_bias=True, tokens=4, gate_rank=128),
    dict(heads=8, batch=128, gate_mode=0, has_bias=False, schedule={"early": 2, "cluster": 2}, gate_rank=128),
    dict(heads=4, batch=2, gate_mode=1, has_bias=False, tokens=3, schedule={"early": 1, "cluster": 1}, gate_rank=128),
    # in the gate warp after its FMA-partial decays (gate_mode 2), and at 8 rows a CTA (half a row tile)
    dict(heads=8, batch=17, gate_mode=2, has_bias=False, gate_rank=128),
    dict(heads=4, batch=1, gate_mode=0, has_bias=False, schedule={"cluster": 16}, gate_rank=128),
]


def case_id(args: dict) -> str:
    def text(v) -> str:
        return "-".join(f"{k}{x}" for k, x in v.items()) if isinstance(v, dict) else str(v)

    return "-".join(f"{k}{text(v)}" for k, v in args.items())


@pytest.mark.parametrize("args", REPRESENTATIVE, ids=case_id)
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
    folded = {p.name: p for p in KdaSplit(4, 2, 0, False, gate_rank=128, gate_pitch=1024).params()}
    assert list(folded)[-1] == "gate_weight" and folded["gate_weight"].shape == (512, 128)
    assert folded["output_gate"].shape == (2, 128) and folded["output_gate"].strides == (1024, 1)
    staged = KdaSplit(8, 128, 0, False, schedule={"early": 2, "cluster": 1}).launch()
    assert staged.shared_bytes >= 128 * 512


@pytest.mark.parametrize("args, match", [
    (dict(tokens=0), "1-8 tokens"),
    (dict(tokens=9), "1-8 tokens"),
    (dict(gate_mode=3), "gate_mode"),
    (dict(gate_form="tanh"), "gate_form"),
    (dict(gate_mode=2, schedule={"early": 1}), "gate_mode 2"),
    (dict(gate_mode=2, schedule={"cluster": 2}), "gate_mode 2"),
    (dict(tokens=2, schedule={"early": 2}), "speculative"),
    (dict(tokens=2, gate_mode=2), "speculative"),
    (dict(tokens=2, schedule={"cluster": 16}), "speculative"),
    (dict(schedule={"early": 3, "cluster": 4}), "64 rows"),
    (dict(schedule={"early": 1, "evict": True}), "evict"),
    (dict(schedule={"cluster": 3}), "1, 2, 4, 8 or 16"),
    (dict(schedule={"lanes": 12}), "lanes"),
    (dict(schedule={"early": 4}), "early"),
    (dict(schedule={"evict": 1, "early": 2}), "evict is true or false"),
    (dict(schedule=(1, 0, 0)), "takes named fields"),
    (dict(schedule={"erly": 1}), "no knob 'erly'"),
    (dict(x_pitch=100), "x_pitch"),
    (dict(raw_gate_pitch=100), "raw_gate_pitch"),
    (dict(slots=1), "2 state slots"),
    (dict(gate_rank=64), "rank 128 .*; this one has rank 64"),
    (dict(gate_rank=128, gate_pitch=100), "gate_pitch 100"),
])
def test_rejects(args, match):
    base = dict(heads=4, batch=2, gate_mode=0, has_bias=False)
    with pytest.raises(ValueError, match=match):
        KdaSplit(**{**base, **args})


def test_schedule_defaults_follow_the_shape():
    """The model-shape choices are schedule fields the lowering (or the table) sets: fast math at 12
    heads, dependents released at entry and a cluster of 8 for one request, 8 lanes a state row up
    to 2 requests (4 at 6 heads); the kernel reads them from its schedule alone."""
    assert KdaSchedule.for_shape(12, 64).fast_math and not KdaSchedule.for_shape(32, 64).fast_math
    one = KdaSchedule.for_shape(32, 1)
    assert one.release_at_entry and one.cluster == 8 and one.lanes == 8
    assert not KdaSchedule.for_shape(32, 2).release_at_entry and KdaSchedule.for_shape(32, 2).cluster == 4
    assert KdaSchedule.for_shape(6, 4).lanes == 8 and KdaSchedule.for_shape(8, 4).lanes == 16
    kernel = KdaSplit(32, 1, schedule={"early": 1})
    assert (kernel.early, kernel.cluster, kernel.lanes_per_row, kernel.trigger_at_entry) == (True, 8, 8, True)
    # a whole schedule is taken as it is: no shape default under it
    fast = KdaSplit(32, 64, schedule=KdaSchedule(fast_math=True, cluster=2))
    assert fast.fast_math and fast.cluster == 2 and not fast.trigger_at_entry
    assert KdaSchedule.for_shape(32, 1, {"early": 1}).changed(KdaSchedule.for_shape(32, 1)) == {"early": 1}


@pytest.mark.parametrize("spec, facts", [
    (KdaSplitSpec(heads=4, batch=2), []),
    (KdaSplitSpec(heads=4, batch=2, head_size=64), ["head size 64"]),
    (KdaSplitSpec(heads=4, batch=2, tokens=9), ["1-8 tokens"]),
    (KdaSplitSpec(heads=4, batch=2, conv_width=3), ["conv width 3"]),
    (KdaSplitSpec(heads=4, batch=2, tokens=9, conv_width=3), ["1-8 tokens", "conv width 3"]),
])
def test_spec_names_each_fact_it_breaks(spec, facts):
    """What a rule asks of KdaSplit (head size, tokens, conv width) is the kernel's own check."""
    problems = spec.problems()
    assert len(problems) == len(facts) and all(f in p for f, p in zip(facts, problems, strict=True))
    if facts:
        with pytest.raises(ValueError, match="^KdaSplit "):
            spec.check()


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

    def knobs(early, lanes, cluster, evict):  # 0 / False: the batch default
        named = {"early": early, "lanes": lanes, "cluster": cluster, "evict": bool(evict)}
        return {k: v for k, v in named.items() if v}

    combos = [(4, 2, mode, tokens % 2 == 0, knobs(early, 0, cluster, evict), tokens, form)
              for early, cluster, evict, mode, form, tokens in itertools.product(
                  range(4), (0, 1, 2, 4, 8, 16), (0, 1), range(3), ("lower_bound", "softplus"), (1, 2, 5, 8))]
    combos += [(4, 2, 0, False, knobs(early, lanes, cluster, evict), tokens, "lower_bound")
               for lanes, early, cluster, evict, tokens in itertools.product(
                   (4, 16, 32), range(4), (0, 1, 2, 4, 8, 16), (0, 1), (1, 8))]
    kernels = {}  # one of each specialization (an explicit default is the default)
    for kernel in (accepted(*c) for c in combos):
        if kernel is not None:
            kernels.setdefault(repr(sorted(vars(kernel).items())), kernel)
    return list(kernels.values())


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
    from lanec.codegen.schedules import kda_schedule, schedule_for, table

    for key, entry in sorted(table().get("kda_split", {}).items()):
        shape = {k: int(v) for k, v in (part.split("=") for part in key.split(","))}
        assert set(entry) == {"schedule", "us"}, f"{key}: an entry is its named schedule and its time"
        overrides = schedule_for("kda_split", shape)
        yield shape["heads"], shape["batch"], shape["tokens"], kda_schedule(shape["heads"], shape["batch"], overrides)


@pytest.mark.parametrize("heads, batch, tokens, schedule", list(table_entries()),
                         ids=lambda v: "-".join(f"{k}{int(x)}" for k, x in v.changed().items())
                         if isinstance(v, KdaSchedule) else str(v))
def test_every_table_schedule_compiles(heads, batch, tokens, schedule, tmp_path):
    """What the autotuner wrote is what the compiler will launch: each entry compiles, with the
    PTX the kernel claims and no register spills."""
    kernel = KdaSplit(heads, batch, schedule=schedule, tokens=tokens)
    check_ptx(kernel, compile_kernel(kernel, cache_dir=tmp_path).ptx)
