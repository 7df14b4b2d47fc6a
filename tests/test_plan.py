"""plan.bin: round trip, and every way a file can be wrong gives one line (also through `lanec show`)."""

from __future__ import annotations

import hashlib
import struct

import pytest
from click.testing import CliRunner

from lanec.cli import main
from lanec.runtime.plan import (
    HEADER,
    MAGIC,
    VERSION,
    Arg,
    Buffer,
    Launch,
    Plan,
    PlanError,
    Shape,
    Source,
    Transform,
    WeightBinding,
    describe,
)


def sample_plan() -> Plan:
    plan = Plan(program='{"batch": 2}', form="form.step @decode {\n}\n")
    gemv = plan.add_cubin(b"\x7fELF gemv cubin")
    norm = plan.add_cubin(b"\x7fELF norm cubin")
    assert plan.add_cubin(b"\x7fELF gemv cubin") == gemv  # deduplicated by content
    plan.buffers = [
        Buffer("tokens", (2,), "int32", "input", "tokens"),
        Buffer("qkv.w", (384, 64), "bfloat16", "weight"),
        Buffer("conv.state", (9, 384, 3), "float32", "state", "conv0"),
        Buffer("x", (2, 64), "bfloat16", "activation"),
        Buffer("qkv", (2, 384), "bfloat16", "output", 0),
    ]
    plan.weights = [WeightBinding("qkv.w", (Source("q", (128, 64)), Source("k", (128, 64), scale=0.1),
                                            Source("v", (128, 64), "float32", 1.0, 0.5)),
                                  (Transform("concatenate", {"axis": 0}),))]
    plan.launches = [
        Launch("norm 0", norm, "kernel_norm", Shape((1, 1, 1), (128, 1, 1)), (Arg("x"),)),
        Launch("gemv qkv 0", gemv, "kernel_gemv", Shape((96, 1, 1), (128, 1, 1), (2, 1, 1), 64 * 1024, True),
               (Arg("x"), Arg("qkv.w", 128 * 64), Arg("qkv")), {"rows": 2, "parts": [128, 128, 128]}),
    ]
    return plan


def write(tmp_path, data: bytes):
    path = tmp_path / "plan.bin"
    path.write_bytes(data)
    return path


def test_round_trip(tmp_path):
    plan = sample_plan()
    plan.write(tmp_path / "plan.bin")
    back = Plan.read(tmp_path / "plan.bin")
    assert back == plan
    assert len(back.cubins) == 2
    assert back.launches[1].shape.cluster == (2, 1, 1) and back.launches[1].shape.shared_bytes == 65536
    assert back.weights[0].sources[2] == Source("v", (128, 64), "float32", 1.0, 0.5)
    assert back.buffer("qkv").source == 0 and back.buffer("conv.state").nbytes == 9 * 384 * 3 * 4


def test_describe_names_launches_and_bindings():
    text = describe(sample_plan())
    assert "2 launches of 2 kernels" in text
    assert "qkv.w" in text and "<- q, k, v: concatenate(axis=0)" in text
    assert "gemv qkv 0" in text and "cluster 2x1x1" in text and "smem 64.0 KiB pdl" in text
    assert "qkv.w+8192" in text
    assert "k0   gemv           1 launches  parts=128,128,128 rows=2" in text  # each kernel's specialization
    assert "k1   norm           1 launches" in text


def reread(tmp_path, data: bytes) -> str:
    with pytest.raises(PlanError) as error:
        Plan.read(write(tmp_path, data))
    message = str(error.value)
    assert "\n" not in message
    return message


def resealed(body: bytes, version: int = VERSION) -> bytes:
    return HEADER.pack(MAGIC, version, 0, len(body), hashlib.sha256(body).digest()) + body


def test_truncated(tmp_path):
    data = sample_plan().to_bytes()
    assert "truncated" in reread(tmp_path, data[:-10])
    assert "truncated" in reread(tmp_path, data[:20])


def test_corrupted(tmp_path):
    data = bytearray(sample_plan().to_bytes())
    data[len(data) // 2] ^= 0x40
    assert "corrupted" in reread(tmp_path, bytes(data))


def test_foreign(tmp_path):
    assert "not a lanec plan" in reread(tmp_path, b"\x7fELF\x02\x01\x01" + bytes(100))
    assert "not a lanec plan" in reread(tmp_path, b"")


def test_newer_version(tmp_path):
    data = bytearray(sample_plan().to_bytes())
    struct.pack_into("<I", data, len(MAGIC), VERSION + 1)
    message = reread(tmp_path, bytes(data))
    assert f"format {VERSION + 1}" in message and "newer lanec" in message


def test_trailing_bytes(tmp_path):
    assert "after its end" in reread(tmp_path, sample_plan().to_bytes() + b"junk")


def test_inconsistent_binding(tmp_path):
    plan = sample_plan()
    body = plan.to_bytes()[HEADER.size:]
    # a launch that binds a buffer the table does not hold, sealed with a valid checksum
    bad = body.replace(b'"buffer":"qkv"', b'"buffer":"qkz"')
    assert bad != body
    assert "binds buffer 'qkz'" in reread(tmp_path, resealed(bad))


def test_malformed_meta(tmp_path):
    body = sample_plan().to_bytes()[HEADER.size:]
    bad = body.replace(b'"grid":', b'"grod":')
    assert "malformed" in reread(tmp_path, resealed(bad))


@pytest.mark.parametrize("mutate, message", [
    (lambda p: p.buffers.append(Buffer("x", (1,), "float32", "activation")), "declared twice"),
    (lambda p: p.buffers.append(Buffer("y", (1,), "float64", "activation")), "unknown dtype 'float64'"),
    (lambda p: p.buffers.append(Buffer("y", (1,), "float32", "scratch")), "role 'scratch'"),
    (lambda p: p.buffers.append(Buffer("w2", (1,), "float32", "weight")), "'w2' has no weight binding"),
    (lambda p: p.weights.append(WeightBinding("missing", (Source("m", (1,)),))), "no buffer 'missing'"),
    (lambda p: p.weights.append(WeightBinding("x", (Source("m", (1,)),))), "is a activation, not a weight"),
    (lambda p: p.launches.append(Launch("l", 7, "e", Shape((1, 1, 1), (32, 1, 1)), ())), "kernel 7 does not exist"),
    (lambda p: p.launches.append(Launch("l", 0, "e", Shape((3, 1, 1), (32, 1, 1), (2, 1, 1)), ())),
     "grid \\[3, 1, 1\\] is not whole clusters of \\[2, 1, 1\\]"),
    (lambda p: p.launches.append(Launch("l", 0, "e", Shape((1, 1, 1), (32, 1, 1)), (Arg("x", 128),))),
     "offset 128 is outside"),
    (lambda p: p.weights.__setitem__(0, WeightBinding("qkv.w", (Source("q", (1,)), Source("k", (1,))))),
     "need a transform that joins them"),
    (lambda p: p.weights.__setitem__(0, WeightBinding("qkv.w", (Source("q", (1,)), Source("k", (1,))),
                                                      (Transform("transpose"),))), "takes one array, not 2"),
])
def test_validate(mutate, message):
    plan = sample_plan()
    mutate(plan)
    with pytest.raises(PlanError, match=message):
        plan.to_bytes()


def test_show(tmp_path):
    sample_plan().write(tmp_path / "plan.bin")
    result = CliRunner().invoke(main, ["show", str(tmp_path / "plan.bin")])
    assert result.exit_code == 0, result.output
    assert "gemv qkv 0" in result.output


@pytest.mark.parametrize("damage", [lambda d: d[:-1], lambda d: b"GGUF" + d[4:], lambda d: d[:60] + b"x" + d[61:]])
def test_show_bad_plan_is_one_line(tmp_path, damage):
    path = write(tmp_path, damage(sample_plan().to_bytes()))
    result = CliRunner().invoke(main, ["show", str(path)])
    assert result.exit_code != 0
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, PlanError)


def test_show_missing_file(tmp_path):
    result = CliRunner().invoke(main, ["show", str(tmp_path / "absent.bin")])
    assert result.exit_code != 0 and "Traceback" not in result.output
