"""The runtime's CPU side: bf16 storage, the safetensors reader, weight transforms, slot tables,
`lanec run --interpret` end to end, and one-line errors where a GPU is needed and absent."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from forms import skip_where_a_gpu_works
from tiny_plan import ROWS, VOCAB, embed_plan

from lanec.cli import main
from lanec.interp.program import Input, Program, State, Step, Weight
from lanec.runtime import dtypes, seeded, weights
from lanec.runtime.plan import Buffer, Plan, Source, Transform, WeightBinding
from lanec.runtime.runner import Options, RunError, interpret, load, validate_pages, validate_slots

safetensors_numpy = pytest.importorskip("safetensors.numpy")



# -- dtypes ------------------------------------------------------------------------------------

def test_bf16_rounds_to_nearest_even():
    halfway = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8)], np.float32)
    np.testing.assert_array_equal(dtypes.round_bf16(halfway), [1.0, 1 + 2**-6, -1.0])
    assert np.isnan(dtypes.round_bf16(np.float32(np.nan)))
    values = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    rounded = dtypes.round_bf16(values)
    assert np.all(np.abs(rounded - values) <= np.abs(values) * 2**-8)
    np.testing.assert_array_equal(dtypes.round_bf16(rounded), rounded)  # bf16 values stay as they are
    assert dtypes.to_bf16(values).dtype == np.uint16 and dtypes.from_bf16(dtypes.to_bf16(values)).dtype == np.float32


def test_storage_dtypes():
    assert dtypes.storage("bfloat16") == np.uint16 and dtypes.storage("bf16") == np.uint16
    assert [dtypes.storage(n) for n in ("float32", "int32", "int8", "uint8", "float16")] == \
        [np.float32, np.int32, np.int8, np.uint8, np.float16]
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        dtypes.storage("float64")


# -- safetensors and weight transforms -----------------------------------------------------------

@pytest.fixture
def checkpoint(tmp_path):
    rng = np.random.default_rng(7)
    tensors = {
        "w.f32": rng.standard_normal((4, 8)).astype(np.float32),
        "w.f16": rng.standard_normal((3, 5)).astype(np.float16),
        "w.i8": rng.integers(-128, 127, (6,)).astype(np.int8),
    }
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file(tensors, str(path), metadata={"format": "np"})
    return path, tensors


def test_safetensors_reader(checkpoint):
    path, tensors = checkpoint
    reader = weights.Checkpoint(path)
    assert sorted(reader.names) == sorted(tensors)
    for name, expected in tensors.items():
        got = reader.tensor(name)
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_safetensors_bf16(tmp_path):
    # safetensors.numpy has no bfloat16: write the file's bytes ourselves (header, then raw data)
    values = dtypes.round_bf16(np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32))
    raw = dtypes.to_bf16(values).tobytes()
    header = json.dumps({"t": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, len(raw)]}}).encode()
    path = tmp_path / "bf16.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + raw)
    np.testing.assert_array_equal(weights.Checkpoint(path).tensor("t"), values)


def binding_plan(shape) -> Plan:
    plan = Plan(program="{}", form="")
    plan.buffers = [Buffer("w", shape, "float32", "weight")]
    plan.weights = [WeightBinding("w", (Source("w.f32", (4, 8), "float32"),))]
    return plan


def test_checkpoint_sources_missing_and_misshaped(checkpoint, tmp_path):
    path, tensors = checkpoint
    reader = weights.Checkpoint(path)
    values = weights.sources(binding_plan((4, 8)), 0, reader)
    np.testing.assert_array_equal(values["w.f32"], tensors["w.f32"])
    plan = binding_plan((4, 8))
    plan.weights = [WeightBinding("w", (Source("w.absent", (4, 8), "float32"),))]
    with pytest.raises(weights.WeightError, match="has no tensor 'w.absent'"):
        weights.sources(plan, 0, reader)
    plan.weights = [WeightBinding("w", (Source("w.f32", (8, 4), "float32"),))]
    with pytest.raises(weights.WeightError, match=r"'w.f32' is \[4, 8\]; the plan expects \[8, 4\]"):
        weights.sources(plan, 0, reader)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\xff" * 64)
    with pytest.raises(weights.WeightError, match="not a safetensors file"):
        weights.Checkpoint(garbage)


def test_random_sources_are_seeded_bounded_and_rounded():
    source = Source("layer.0.w", (64, 32), "bfloat16", scale=0.5, center=1.0)
    first, again = weights.random_source(source, 5), weights.random_source(source, 5)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, weights.random_source(source, 6))
    assert np.all(np.abs(first - 1.0) <= 1.5 + 1e-2) and first.std() > 0.3
    np.testing.assert_array_equal(dtypes.round_bf16(first), first)


def test_random_sources_do_not_depend_on_the_threads(monkeypatch):
    monkeypatch.setattr(seeded, "CHUNK", 1000)  # 2.5 chunks: a partial last chunk
    for dtype in ("bfloat16", "float32", "float16"):
        source = Source("layer.0.w", (50, 50), dtype, scale=0.5, center=1.0)
        one, four = weights.random_source(source, 5, threads=1), weights.random_source(source, 5, threads=4)
        assert one.shape == (50, 50) and one.dtype == np.float32
        np.testing.assert_array_equal(one, four)
        chunks = one.reshape(-1)[:2000].reshape(2, 1000)
        assert not np.array_equal(chunks[0], chunks[1])
        if dtype == "float16":
            np.testing.assert_array_equal(one.astype(np.float16).astype(np.float32), one)


def test_transforms():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    b = -a
    apply = weights.apply
    np.testing.assert_array_equal(apply(Transform("concatenate"), [a, b]), np.vstack([a, b]))
    assert apply(Transform("stack"), [a, b]).shape == (2, 4, 3)
    np.testing.assert_array_equal(apply(Transform("transpose"), [a]), a.T)
    tiles = apply(Transform("interleave", {"rows": 2}), [a, b])
    np.testing.assert_array_equal(tiles, np.vstack([a[:2], b[:2], a[2:], b[2:]]))
    with pytest.raises(weights.WeightError, match="whole tiles"):
        apply(Transform("interleave", {"rows": 3}), [a, b])


def test_q8_0_matches_the_interpreter():
    from lanec.interp.ops import q8_0

    rows = np.random.default_rng(2).standard_normal((3, 64)).astype(np.float32)
    rows[1, :32] = 0  # an all-zero block is zero
    packed = weights.quantize_q8_0(rows)
    assert packed.dtype == np.uint8 and packed.shape == (3, 2 * 34)
    blocks = packed.reshape(3, 2, 34)
    scale = blocks[..., :2].copy().view(np.float16).astype(np.float32)
    words = blocks[..., 2:].view(np.int8).astype(np.float32)
    np.testing.assert_allclose((words * scale).reshape(3, 64), q8_0(rows), rtol=0, atol=1e-6)


def test_make_checks_the_buffer_shape():
    values = {"w.f32": np.ones((4, 8), np.float32)}
    plan = binding_plan((8, 4))
    with pytest.raises(weights.WeightError, match=r"give \[4, 8\]; the buffer is \[8, 4\]"):
        weights.make(plan.weights[0], values, plan)
    plan.weights = [WeightBinding("w", (Source("w.f32", (4, 8), "float32"),), (Transform("transpose"),))]
    np.testing.assert_array_equal(weights.make(plan.weights[0], values, plan), np.ones((8, 4)))


# -- slot tables -------------------------------------------------------------------------------

def test_slots_single_token():
    validate_slots(np.array([3, -1, 0, 5], np.int32), tokens=1, capacity=6)
    validate_slots(np.array([[3, 3], [4, 4]], np.int32), tokens=1)  # column 0 only
    with pytest.raises(RunError, match="request 2 uses slot 3 and so does request 0"):
        validate_slots(np.array([3, -1, 3], np.int32), tokens=1)
    with pytest.raises(RunError, match="states hold slots 1..5"):
        validate_slots(np.array([6], np.int32), tokens=1, capacity=6)
    with pytest.raises(RunError, match="slots are integers"):
        validate_slots(np.array([1.0]), tokens=1)


def test_slots_speculative():
    slots = np.array([[1, 2, 3], [4, -1, 5], [6, 0, -1]], np.int32)
    validate_slots(slots, tokens=3, accepted=np.array([2, 3, 3]))  # request 2 is padding
    with pytest.raises(RunError, match=r"needs \[batch, >= 4\]"):
        validate_slots(slots, tokens=4, accepted=np.array([1, 1, 1]))
    with pytest.raises(RunError, match="accepted 4 tokens: between 1 and 3"):
        validate_slots(slots, tokens=3, accepted=np.array([1, 4, 1]))
    with pytest.raises(RunError, match="accepted counts"):
        validate_slots(slots, tokens=3)
    shared = np.array([[1, 2, 3], [4, 2, 5]], np.int32)
    with pytest.raises(RunError, match="request 1 uses slot 2 and so does request 0"):
        validate_slots(shared, tokens=3, accepted=np.array([1, 1]))
    padding = np.array([[1, 2, 3], [2, -1, -1]], np.int32)  # request 1 reads slot -1: padding, never written
    validate_slots(padding, tokens=3, accepted=np.array([1, 2]))


# -- page tables and positions -----------------------------------------------------------------

PAGES = np.array([[3, 0, -1], [1, 2, -1]], np.int32)  # request 0 holds pages 3, 0; request 1 pages 1, 2


def pages_error(pages, positions, tokens=2, page_size=4, cache_pages=4) -> str:
    with pytest.raises(RunError) as caught:
        validate_pages(np.asarray(pages), np.asarray(positions), tokens, page_size, cache_pages)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_pages_and_positions_that_the_kernels_can_read():
    validate_pages(PAGES, np.array([6, 7, 0, 1], np.int32), tokens=2, page_size=4, cache_pages=4)
    validate_pages(PAGES, np.array([3, 4], np.int32), tokens=1, page_size=4, cache_pages=4)


def test_pages_and_positions_that_the_runtime_refuses():
    assert "request 1 reaches position 8 but holds no page in column 2 (positions 8..11)" in \
        pages_error(PAGES, [0, 1, 7, 8])
    assert "page column 3; the page table has 3 columns" in pages_error(PAGES, [0, 1, 12, 13])
    assert "request 0 uses page 4; the cache holds pages 0..3" in pages_error([[4, 0, -1], [1, 2, -1]], [0, 1, 2, 3])
    shared = [[3, 0, -1], [3, 2, -1]]  # both requests hold page 3 and write its rows 1 and 2
    assert "requests 0 and 1 both write row 2 of page 3" in pages_error(shared, [1, 2, 2, 3])
    validate_pages(np.array(shared, np.int32), np.array([4, 5, 6, 7], np.int32), 2, 4, 4)  # page 3 only read
    assert "request 1 holds positions [5, 7]: a request's rows are consecutive" in pages_error(PAGES, [0, 1, 5, 7])
    assert "request 0 starts at position -1" in pages_error(PAGES, [-1, 0, 1, 2])
    assert "need [4]" in pages_error(PAGES, [0, 1, 2])
    assert "holds float64" in pages_error(PAGES, np.array([0.0, 1.0, 2.0, 3.0]))


# -- running a plan ----------------------------------------------------------------------------

def test_load_shares_sources_with_the_interpreter(tmp_path):
    embed_plan(tmp_path / "plan.bin")
    plan, program, env, sources = load(tmp_path / "plan.bin", Options(seed=3))
    np.testing.assert_array_equal(env.weights["w.q"], sources["w.q"])
    wqk = weights.make(plan.weights[1], sources, plan)
    np.testing.assert_array_equal(dtypes.from_bf16(wqk[:ROWS]), sources["w.q"])
    outputs = program.run(env)
    np.testing.assert_allclose(outputs[0], sources["embed"][env.inputs["tokens"]] @ sources["w.q"].T, rtol=1e-5)


def test_run_interpret(tmp_path):
    embed_plan(tmp_path / "plan.bin")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "plan.bin"), "--interpret", "--steps", "2"])
    assert result.exit_code == 0, result.output
    assert "output 0: float32 [4, 32]" in result.output and "interpreted 2 steps" in result.output


def attention_plan(path, batch: int, tokens: int) -> None:
    """An embedding as the queries, two products as the keys and values, attention over paged
    caches of 4 pages a request of 4 positions each (a plan to interpret: no launches)."""
    rows, cache = batch * tokens, [batch * 4, 4, 1, 8]
    program = Program(
        batch=batch, tokens=tokens,
        inputs=[Input(0, "tokens", [rows], "i32"), Input(1, "positions", [rows], "i32"),
                Input(2, "pages", [batch, 4], "i32")],
        weights=[Weight(3, "embed", "bf16", [VOCAB, 16], "bf16"), Weight(4, "w.k", "bf16", [8, 16], "bf16"),
                 Weight(5, "w.v", "bf16", [8, 16], "bf16")],
        states=[State(6, "key_cache", "kv", cache, "bf16"), State(7, "value_cache", "kv", cache, "bf16")],
        steps=[Step("embed", {"tokens": 0, "table": 3}, [8]), Step("product", {"x": 8, "w": [4, 5]}, [9, 10]),
               Step("attention", {"q": 8, "k": 9, "v": 10, "k_cache": 6, "v_cache": 7, "pages": 2, "positions": 1},
                    [11], {"heads": 2, "kv_heads": 1, "scale": 0.35})],
        outputs=[11],
    )
    plan = Plan(program=program.to_json(), form="// the form text\n")
    shapes = {"embed": (VOCAB, 16), "w.k": (8, 16), "w.v": (8, 16)}
    plan.buffers = [Buffer(name, shape, "bfloat16", "weight") for name, shape in shapes.items()]
    plan.weights = [WeightBinding(name, (Source(name, shape, scale=1.0),)) for name, shape in shapes.items()]
    plan.write(path)


@pytest.mark.parametrize("batch, tokens", [(3, 1), (2, 3)])
def test_interpret_moves_positions_on_step_by_step(tmp_path, batch, tokens):
    attention_plan(tmp_path / "plan.bin", batch, tokens)
    options = Options(steps=3, interpret=True, seed=5)
    _, program, env, _ = load(tmp_path / "plan.bin", options)
    first, pages, before = env.inputs["positions"].copy(), env.inputs["pages"], env.states["key_cache"].copy()
    assert first.max() + 2 * tokens < 16  # room left in the request's 4 pages of 4 for the steps to come
    assert interpret(program, env, options, lambda line: None) == 0
    np.testing.assert_array_equal(env.inputs["positions"], first + 2 * tokens)
    written = {(int(pages[row // tokens, p // 4]), int(p % 4)) for row, start in enumerate(first)
               for p in range(start, start + 3 * tokens, tokens)}
    changed = {(int(page), int(at)) for page, at in zip(*np.nonzero((env.states["key_cache"] != before).any(axis=(2, 3))))}
    assert changed == written  # each step's rows, and nothing else


def test_run_without_a_gpu_is_one_line(tmp_path):
    skip_where_a_gpu_works()
    embed_plan(tmp_path / "plan.bin")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "plan.bin")])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("Error: ") and ("driver" in result.output or "GPU" in result.output)


def test_run_bad_plan_and_options_are_one_line(tmp_path):
    (tmp_path / "plan.bin").write_bytes(b"LANEPLAN\x01")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "plan.bin"), "--interpret"])
    assert result.exit_code == 1 and "truncated" in result.output and result.output.count("\n") == 1
    embed_plan(tmp_path / "plan.bin")
    result = CliRunner().invoke(main, ["run", str(tmp_path / "plan.bin"), "--check", "--interpret"])
    assert result.exit_code == 1 and "choose one" in result.output


def test_python_m_runtime(tmp_path):
    embed_plan(tmp_path / "plan.bin")
    done = subprocess.run([sys.executable, "-m", "lanec.runtime", str(tmp_path / "plan.bin"), "--interpret"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "output 1: float32 [4, 32]" in done.stdout
    (tmp_path / "plan.bin").write_bytes(b"not a plan")
    done = subprocess.run([sys.executable, "-m", "lanec.runtime", str(tmp_path / "plan.bin"), "--interpret"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


# -- the states' L2 windows (LANEC_L2_STATES; measured slower on the H200, off by default) -----------

def _windowed_plan() -> Plan:
    from lanec.runtime.plan import Arg, Launch, Shape

    shape = Shape((1, 1, 1), (32, 1, 1))
    plan = Plan()
    plan.buffers = [Buffer("l0.recurrent", (2, 4, 8, 8), "float32", "state", "l0.recurrent"),
                    Buffer("l0.conv", (2, 96, 3), "bfloat16", "state", "l0.conv"),
                    Buffer("l1.latent", (4, 16, 64), "bfloat16", "state", "l1.latent"),
                    Buffer("x", (1, 64), "bfloat16", "activation")]
    plan.launches = [Launch("kda", 0, "k", shape, (Arg("x"), Arg("l0.conv"), Arg("l0.recurrent"))),
                     Launch("gemv", 0, "g", shape, (Arg("x"),)),
                     Launch("latent", 0, "a", shape, (Arg("x"), Arg("l1.latent")))]
    return plan


def test_a_launch_takes_the_window_of_its_largest_state_and_auto_its_share_of_the_set_aside():
    from lanec.runtime.runner import l2_windows, touched_state_bytes

    plan = _windowed_plan()
    # slot 0 is padding: a slot state's touched bytes are its other slots'; a cache counts whole
    assert touched_state_bytes(plan) == 1024 + 576 + 8192
    assert l2_windows(plan, "off", 1 << 20, 1 << 27) == [None, None, None]
    assert l2_windows(plan, "auto", 1 << 20, 1 << 27) == [("l0.recurrent", 1.0), None, ("l1.latent", 1.0)]
    half = l2_windows(plan, "auto", (1024 + 576 + 8192) // 2, 1 << 27)
    assert [w and w[1] for w in half] == [0.5, None, 0.5]
    assert l2_windows(plan, "0.25", 1 << 20, 1 << 27)[0] == ("l0.recurrent", 0.25)
    assert l2_windows(plan, "auto", 0, 1 << 27) == [None, None, None]  # a GPU without a set-aside


@pytest.mark.parametrize("setting", ["1.5", "0", "most"])
def test_a_bad_l2_setting_is_one_line(setting):
    from lanec.runtime.runner import l2_windows

    with pytest.raises(RunError, match=r"LANEC_L2_STATES=.*(off, auto, or a hit ratio|a hit ratio is in)"):
        l2_windows(_windowed_plan(), setting, 1 << 20, 1 << 27)
