"""Tensor parallel plans and their runtime, on the CPU (issue 16): `lanec compile --tp N` writes
rank 0's step with its all-reduces as NCCL collectives (format 2; the launch after each without
PDL; sharded sources that keep the whole tensor's initialiser), a plan for N ranks refuses any
other count in one line, each rank's program and environment derive from rank 0's and are the
unsharded plan's slices, the rank launcher reads torchrun's and mpirun's variables, starts and
reports its ranks, and nothing imports nccl4py until a plan for several ranks runs."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from forms import DENSE
from test_shard import KIMI_LINEAR, LLAMA, build, rank_step

from lanec.cli import main
from lanec.interp.lower import program_of
from lanec.interp.tp import Shard, run_ranks
from lanec.runtime import collectives, parallel, runner
from lanec.runtime.driver import DeviceError
from lanec.runtime.plan import HEADER, MAGIC, SECTION, SECTION_COUNT, Arg, Collective, Plan, PlanError, describe
from lanec.runtime.runner import Options, RunError, in_order, parse

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[int, Path]:
    """The small dense form compiled for one rank and for two."""
    folder = tmp_path_factory.mktemp("tp")
    (folder / "dense.mlir").write_text(DENSE)
    paths = {}
    for ranks in (1, 2):
        paths[ranks] = folder / f"dense-tp{ranks}.plan"
        result = CliRunner().invoke(main, ["compile", "--tp", str(ranks), str(folder / "dense.mlir"),
                                           "-o", str(paths[ranks])])
        assert result.exit_code == 0, result.output
    assert "2 ranks (1 all-reduces a step)" in result.output
    return paths


def test_a_plan_for_two_ranks_holds_its_all_reduce_in_launch_order(plans):
    plan = Plan.read(plans[2])
    assert plan.ranks == 2 and plan.version == 2 and Plan.read(plans[1]).version == 1
    (reduce,) = plan.collectives
    assert (reduce.count, reduce.dtype) == (3 * 64, "bfloat16")
    assert plan.launches[reduce.at - 1].args[-1].buffer == reduce.source.buffer  # right after the partial sums
    assert plan.launches[reduce.at].name.startswith("argmax")
    assert not plan.launches[reduce.at].shape.pdl  # NCCL never triggers the launch after it
    assert all(launch.shape.pdl for i, launch in enumerate(plan.launches) if i != reduce.at)
    assert plan.buffer(reduce.target.buffer).role == "output"  # the summed product is the step's output
    text = describe(plan)
    # beside NCCL's, the plan carries the one-shot kernel for the runtime's choice (runtime/peer.py)
    assert reduce.oneshot is not None and 0 <= reduce.oneshot.kernel < len(plan.cubins)
    assert reduce.oneshot.shape.block == (512, 1, 1) and reduce.oneshot.entry in plan.cubins[reduce.oneshot.kernel].decode(
        "latin-1")
    assert "tensor parallel over 2 ranks" in text and "nccl or one-shot (k" in text
    assert "sum of 192 bfloat16 over 2 ranks" in text and "all_reduce_oneshot" in text


@pytest.fixture(scope="module")
def normed(tmp_path_factory) -> Path:
    """examples/dense-small.mlir for two ranks: every all-reduce read by the norm right after it."""
    path = tmp_path_factory.mktemp("tp-norm") / "dense-small-tp2.plan"
    result = CliRunner().invoke(main, ["compile", "--tp", "2", str(ROOT / "examples" / "dense-small.mlir"),
                                       "-o", str(path)])
    assert result.exit_code == 0, result.output
    return path


def test_an_all_reduce_into_the_norm_carries_one_launch_for_both(normed):
    """fold-all-reduce-into-norm: beside NCCL's and the one-shot, each all-reduce carries the
    all_reduce_norm launch that does it and the rmsnorm launch at its place."""
    plan = Plan.read(normed)
    assert len(plan.collectives) == 4
    for reduce in plan.collectives:
        fused, norm = reduce.fused, plan.launches[reduce.at]
        assert fused is not None and reduce.oneshot is not None and fused.kernel != reduce.oneshot.kernel
        assert fused.replaces == reduce.at and norm.name.startswith("rmsnorm") and norm.spec["residual"]
        # the partial sums in x's place, then the norm's residual (the one it reads beside the total), w, y, h
        assert fused.args[0] == reduce.source and reduce.target in norm.args[:2]
        assert fused.args[1:] == tuple(a for a in norm.args if a != reduce.target)
        assert fused.rows == norm.spec["rows"] == 1 and fused.shape.grid == norm.shape.grid
        assert fused.shape.block == norm.shape.block and fused.shape.pdl
    text = describe(plan)
    assert text.count(", or with launch ") == 4 and "all_reduce_norm" in text


@pytest.mark.parametrize("change, message", [
    (lambda m: m["collectives"][0]["fused"].update(replaces=0), "replaces launch 0, not the rmsnorm launch at its place"),
    (lambda m: m["collectives"][0]["fused"].update(kernel=999), "its all_reduce_norm kernel 999 does not exist"),
    (lambda m: m["collectives"][0]["fused"].update(rows=3), "values are not 3 rows"),
    (lambda m: m["collectives"][0]["fused"]["args"][1].update(buffer="nowhere"), "binds buffer 'nowhere'"),
])
def test_a_wrong_fused_norm_is_a_one_line_error(normed, tmp_path, change, message):
    path = tmp_path / "bad.plan"
    path.write_bytes(resealed(Plan.read(normed), change))
    with pytest.raises(PlanError) as error:
        Plan.read(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_sharded_sources_keep_the_whole_tensors_initialiser(plans):
    one = {s.name: s for b in Plan.read(plans[1]).weights for s in b.sources}
    two = {s.name: s for b in Plan.read(plans[2]).weights for s in b.sources}
    assert two["down"].shard == "dim 1 part 0 of 2" and two["down"].shape == (64, 256)
    assert two["gate"].shard == "dim 0 part 0 of 2" and two["embed"].shard == ""
    for name, source in two.items():  # the fan-in of the whole product: the seeded values are the same model's
        assert (source.scale, source.center) == (one[name].scale, one[name].center)
        assert parallel.whole_source(source) == one[name]


def resealed(plan: Plan, change, version: int | None = None) -> bytes:
    """The plan file with `change` made to its META (and another header version), sealed anew."""
    meta = json.loads(json.dumps(plan.meta()))
    change(meta)
    sections = [(b"META", json.dumps(meta).encode())] + [(b"CUBN", c) for c in plan.cubins]
    sections += [(b"SEED", s.cubin) for s in plan.seeders]
    sections += [(b"PROG", plan.program.encode()), (b"FORM", plan.form.encode())]
    table, payloads = [SECTION_COUNT.pack(len(sections))], []
    offset = SECTION_COUNT.size + SECTION.size * len(sections)
    for tag, payload in sections:
        table.append(SECTION.pack(tag, offset, len(payload)))
        payloads.append(payload)
        offset += len(payload)
    body = b"".join(table + payloads)
    return HEADER.pack(MAGIC, plan.version if version is None else version, 0, len(body),
                       hashlib.sha256(body).digest()) + body


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(ranks=1), "collectives in a plan for one rank"),
    (lambda m: m["launches"][m["collectives"][0]["at"]]["shape"].update(pdl=True), "must launch without"),
    (lambda m: m["collectives"][0].update(count=10**6), "run past buffer"),
    (lambda m: m["collectives"][0].update(dtype="float32"), "holds bfloat16, not float32"),
    (lambda m: m["collectives"][0].update(at=10**3), "out of order or past the"),
    (lambda m: m["collectives"][0].update(op="max"), "this lanec runs all_reduce sum"),
])
def test_a_wrong_collective_is_a_one_line_error(plans, tmp_path, change, message):
    path = tmp_path / "bad.plan"
    path.write_bytes(resealed(Plan.read(plans[2]), change))
    with pytest.raises(PlanError) as error:
        Plan.read(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_plan_for_several_ranks_is_never_format_1(plans, tmp_path):
    """An older lanec (format 1) refuses it, rather than run it without its all-reduces."""
    path = tmp_path / "old.plan"
    path.write_bytes(resealed(Plan.read(plans[2]), lambda m: None, version=1))
    with pytest.raises(PlanError, match=r"declares format 1 but holds a plan of format 2 \(2 ranks\)"):
        Plan.read(path)


@pytest.mark.parametrize("ranks, tp, environ, message", [
    (2, 1, {}, "is a plan for 2 ranks (`lanec compile --tp 2`); run on 1: compile it with --tp 1"),
    (1, 2, {}, "is a plan for 1 rank (compiled without --tp); run on 2: compile it with --tp 2"),
    (2, None, {"RANK": "0", "WORLD_SIZE": "3"}, "is a plan for 2 ranks (`lanec compile --tp 2`); run on 3"),
    (2, 2, {"RANK": "0", "WORLD_SIZE": "4"}, "--tp 2, but torchrun started 4 ranks"),
])
def test_a_plan_run_on_another_rank_count_is_a_one_line_error(plans, ranks, tp, environ, message):
    with pytest.raises(RunError) as error:
        parallel.execute(plans[ranks], Options(tp=tp), print, environ)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_command_line_refuses_the_wrong_count_before_any_gpu(plans):
    result = CliRunner().invoke(main, ["run", str(plans[2]), "--tp", "3"])
    assert result.exit_code == 1 and "is a plan for 2 ranks" in result.output
    result = CliRunner().invoke(main, ["run", str(plans[2]), "--interpret"])
    assert result.exit_code == 1 and "--interpret runs a plan for one GPU" in result.output


def test_a_plan_for_one_rank_runs_as_before(plans):
    assert parallel.execute(plans[1], Options(), print, {}) is None
    assert parallel.execute(plans[1], Options(tp=1), print, {"RANK": "0", "WORLD_SIZE": "1"}) is None


@pytest.mark.parametrize("environ, rank", [
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LANEC_TP_ID": "/x/id"}, (1, 2, 1, "/x/id", "torchrun")),
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
      "LANEC_TP_ID": "/y"}, (3, 4, 1, "/y", "mpirun (Open MPI)")),
    ({"PMI_RANK": "2", "PMI_SIZE": "4", "LANEC_TP_ID": "/z"}, (2, 4, 2, "/z", "mpirun (MPICH)")),
])
def test_a_launchers_variables_make_this_process_one_rank(environ, rank):
    got = parallel.rank_of(environ)
    assert (got.rank, got.ranks, got.device, str(got.id_file), got.launcher) == rank


def test_without_lanec_tp_id_the_id_file_is_named_by_the_job():
    got = parallel.rank_of({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"})
    assert got.id_file.name == "lanec-nccl-10.0.0.1-29500.id"
    assert parallel.rank_of({}) is None


@pytest.mark.parametrize("environ, message", [
    ({"WORLD_SIZE": "2"}, "torchrun: WORLD_SIZE is set but RANK is not"),
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not a number"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "rank 2 of 2 (local rank 2) is not a rank of the job"),
])
def test_bad_launcher_variables_are_one_line_errors(environ, message):
    with pytest.raises(RunError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parallel.rank_of(environ)


def test_a_started_rank_gets_the_parents_options_and_torchruns_variables(tmp_path):
    options = Options(steps=3, check=True, pdl=False, seed=9, repeats=4, weights=Path("w.safetensors"),
                      outputs=tmp_path / "o.npz", context=64)
    command = parallel.rank_command("p.plan", options, 2)
    assert command[:3] == [sys.executable, "-m", "lanec.runtime"]
    assert parse(command[3:], "x") == (Path("p.plan"), dataclasses.replace(options, tp=2))
    environ = parallel.rank_environ({"PYTHONPATH": "/a", "NCCL_NVLS_ENABLE": "0"}, 1, 2, tmp_path)
    assert (environ["RANK"], environ["WORLD_SIZE"], environ["LOCAL_RANK"]) == ("1", "2", "1")
    assert environ["LANEC_TP_ID"] == str(tmp_path / "nccl.id")
    assert environ["PYTHONPATH"] == f"{ROOT}:/a"
    assert environ["NCCL_DEBUG"] == "WARN" and environ["NCCL_NVLS_ENABLE"] == "0"  # multicast stays off
    assert environ["LANEC_TP_PHASES"] == "1" and environ["PYTHONUNBUFFERED"] == "1"
    assert parallel.rank_environ({"NCCL_DEBUG": "INFO"}, 0, 2, tmp_path)["NCCL_DEBUG"] == "INFO"


def rank_script(code: str):
    """A stand-in rank process: python running `code` (with `rank` set)."""
    return lambda rank: [sys.executable, "-c", f"import sys, time\nrank = {rank}\n{code}"]


def test_the_launcher_says_rank_0s_lines_and_reports_a_failing_rank(monkeypatch, tmp_path):
    monkeypatch.setenv("LANEC_TP_LOGS", str(tmp_path))
    lines: list[str] = []
    script = rank_script("print(f'line of rank {rank}')\n"
                         "if rank == 1:\n    print('error: GPU 1 does not exist', file=sys.stderr); sys.exit(1)")
    with pytest.raises(RunError, match=f"^rank 1: GPU 1 does not exist; the ranks' logs: {tmp_path}$"):
        parallel.launch_ranks("p", Options(), 2, lines.append, command=script)
    assert lines == ["line of rank 0"]
    lines.clear()
    verdict = "if rank == 1:\n    print('check: 1 of 2 agree with the interpreter; mismatch in x', file=sys.stderr)\n" \
              "    sys.exit(1)\nprint('check: 2 of 2 agree with the interpreter')"
    assert parallel.launch_ranks("p", Options(), 2, lines.append, command=rank_script(verdict)) == 1
    assert lines == ["check: 2 of 2 agree with the interpreter",
                     "rank 1: check: 1 of 2 agree with the interpreter; mismatch in x"]


@pytest.mark.parametrize("failing", [0, 2])
def test_ranks_left_waiting_for_a_failed_one_are_stopped(monkeypatch, tmp_path, failing):
    """Whichever rank fails (rank 2 while rank 0 still runs, too), the others are stopped soon."""
    monkeypatch.setattr(parallel, "GRACE_S", 0.5)
    monkeypatch.setenv("LANEC_TP_LOGS", str(tmp_path))
    script = rank_script(f"if rank == {failing}:\n    raise SystemExit('error: NCCL all_reduce: unhandled system "
                         "error')\ntime.sleep(60)")
    started = time.monotonic()
    with pytest.raises(RunError, match=f"^rank {failing}: NCCL all_reduce: unhandled system error; the ranks' logs: "):
        parallel.launch_ranks("p", Options(), 3, print, command=script)
    assert time.monotonic() - started < 20


MARK = collectives.PHASE_MARK


def test_a_rank_stuck_in_a_phase_past_the_deadline_is_stopped_with_its_phase_and_last_lines(monkeypatch, capsys,
                                                                                            tmp_path):
    """Rank 1 waits in NCCL's communicator creation and never ends itself (as a call holding the
    GIL would); rank 0 computes. The launcher stops both soon after the deadline, names rank 1's
    phase, shows the ranks' last lines and keeps their logs."""
    monkeypatch.setattr(parallel, "GRACE_S", 0.2)
    monkeypatch.setattr(collectives, "BACKSTOP_S", 0.1)
    monkeypatch.setenv("LANEC_TP_TIMEOUT", "0.3")
    monkeypatch.setenv("LANEC_TP_LOGS", str(tmp_path / "logs"))
    script = rank_script("if rank == 1:\n"
                         f"    print('{MARK}rank 1 waits: NCCL communicator creation (ncclCommInitRank)', "
                         "file=sys.stderr, flush=True)\n"
                         "print(f'rank {rank} started', flush=True)\ntime.sleep(60)")
    started = time.monotonic()
    with pytest.raises(RunError, match=r"^rank 1: NCCL communicator creation \(ncclCommInitRank\) did not finish in "
                       r"\d+ s and the rank did not end itself: the launcher stopped every rank; the ranks' logs: "):
        parallel.launch_ranks("p", Options(), 2, print, command=script)
    assert time.monotonic() - started < 20
    shown = capsys.readouterr()
    assert "rank 0 started" in shown.out  # rank 0's lines are said all the same
    assert "rank 1's last lines:" in shown.err and "rank1.out: rank 1 started" in shown.err
    assert "rank1.err: lanec phase: rank 1 waits: NCCL communicator creation" in shown.err
    assert (tmp_path / "logs" / "rank1.err").read_text().startswith(MARK)


def test_a_rank_ended_by_its_watchdog_is_reported_with_where_the_others_were(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(parallel, "GRACE_S", 0.2)
    monkeypatch.setenv("LANEC_TP_LOGS", str(tmp_path / "logs"))
    script = rank_script(f"print(f'{MARK}rank {{rank}} waits: ' + ('the first step' if rank == 0 else "
                         "'NCCL communicator creation'), file=sys.stderr, flush=True)\n"
                         "if rank == 1:\n"
                         "    print('error: rank 1: NCCL communicator creation did not finish in 120 s: another rank "
                         "failed', file=sys.stderr)\n    sys.exit(124)\n"
                         "time.sleep(60)")
    with pytest.raises(RunError, match=r"^rank 1: NCCL communicator creation did not finish in 120 s: another rank "
                       r"failed \(rank 0 was in the first step\); the ranks' logs: (\S+)$") as caught:
        parallel.launch_ranks("p", Options(), 2, print, command=script)
    folder = Path(str(caught.value).rsplit(" ", 1)[1])
    assert sorted(p.name for p in folder.iterdir()) == ["rank0.err", "rank0.out", "rank1.err", "rank1.out"]
    assert "rank 0's last lines:" in capsys.readouterr().err


def test_ranks_write_to_log_files_never_to_pipes_left_undrained(tmp_path, monkeypatch):
    """Ranks that write far more than a pipe holds (64 KiB) still finish; a successful run's
    temporary logs are removed, a chosen folder (LANEC_TP_LOGS) kept."""
    script = rank_script("sys.stderr.write('e' * 2_000_000)\nfor i in range(50_000):\n    print(f'line {i}')")
    lines: list[str] = []
    made = []
    real_mkdtemp = parallel.tempfile.mkdtemp
    monkeypatch.setattr(parallel.tempfile, "mkdtemp", lambda **kw: made.append(real_mkdtemp(**kw)) or made[-1])
    assert parallel.launch_ranks("p", Options(), 2, lines.append, command=script) == 0
    assert len(lines) == 50_000 and lines[-1] == "line 49999"
    assert made and not Path(made[0]).exists()
    monkeypatch.setenv("LANEC_TP_LOGS", str(tmp_path / "kept"))
    assert parallel.launch_ranks("p", Options(), 2, lines.append, command=script) == 0
    assert (tmp_path / "kept" / "rank1.err").stat().st_size == 2_000_000


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_ranks_die_with_their_launcher(tmp_path):
    """A launcher killed (as a test's timeout kills it) leaves no rank holding a GPU."""
    pid_file = tmp_path / "rank.pid"
    rank = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    code = ("import sys; from lanec.runtime import parallel; from lanec.runtime.runner import Options; "
            f"parallel.launch_ranks('p', Options(), 1, print, command=lambda r: [sys.executable, '-c', {rank!r}])")
    launcher = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and launcher.poll() is None
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        assert running(pid)
    finally:
        launcher.kill()
        launcher.wait()
    deadline = time.monotonic() + 10
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(pid)


def test_a_watchdog_ends_a_phase_that_waits_past_its_deadline():
    out, stops = io.StringIO(), []
    watchdog = collectives.Watchdog(1, 0.2, out=out, marks=True, stop=stops.append, backstop=False)
    with watchdog.phase("the id exchange"):
        pass
    time.sleep(0.4)
    assert stops == []  # a phase that ended in time
    with watchdog.phase("NCCL communicator creation"):
        time.sleep(0.6)
    assert stops == [collectives.TIMED_OUT]
    assert out.getvalue().splitlines() == [
        f"{MARK}rank 1 waits: the id exchange", f"{MARK}rank 1 done: the id exchange",
        f"{MARK}rank 1 waits: NCCL communicator creation",
        "error: rank 1: NCCL communicator creation did not finish in 0 s: another rank failed, never started or "
        "waits elsewhere (LANEC_TP_TIMEOUT sets the deadline; NCCL_DEBUG=INFO says more)",
        f"{MARK}rank 1 done: NCCL communicator creation"]


@pytest.mark.parametrize("text, seconds", [("", collectives.TIMEOUT_S), ("120", 120.0), (" 0.5 ", 0.5)])
def test_the_ranks_deadline_comes_from_lanec_tp_timeout(text, seconds):
    assert collectives.timeout_s({"LANEC_TP_TIMEOUT": text}) == seconds


@pytest.mark.parametrize("text", ["x", "0", "-3", "nan"])
def test_a_bad_lanec_tp_timeout_is_a_one_line_error(text):
    with pytest.raises(DeviceError, match=r"^LANEC_TP_TIMEOUT=.*: give the seconds a rank may wait on the others"):
        collectives.timeout_s({"LANEC_TP_TIMEOUT": text})


class FakeNccl:
    """nccl4py's bindings as `Communicator` calls them; comm_init_rank takes `init_s` (a peer that
    never joins: forever, as far as a test goes)."""

    def __init__(self, init_s: float = 0.0):
        self.init_s, self.calls = init_s, []
        self.UniqueId = type("UniqueId", (), {"from_buffer": staticmethod(bytes)})

    def get_unique_id(self):
        return b"\x05" * 128

    def comm_init_rank(self, ranks, comm_id, rank):
        self.calls.append(("init", ranks, bytes(comm_id), rank))
        time.sleep(self.init_s)
        return "comm"

    def comm_abort(self, handle):
        self.calls.append(("abort", handle))

    def comm_destroy(self, handle):
        self.calls.append(("destroy", handle))


def test_joining_runs_the_id_exchange_and_communicator_creation_under_the_deadline(tmp_path, monkeypatch):
    nccl = FakeNccl(init_s=0.6)
    monkeypatch.setattr(collectives, "bindings", lambda: nccl)
    out, stops = io.StringIO(), []
    watchdog = collectives.Watchdog(0, 0.2, out=out, stop=stops.append, backstop=False)
    communicator = collectives.Communicator.join(0, 2, tmp_path / "nccl.id", watchdog)
    assert nccl.calls == [("init", 2, b"\x05" * 128, 0)] and stops == [collectives.TIMED_OUT]
    digest = hashlib.sha256(b"\x05" * 128).hexdigest()[:12]
    assert out.getvalue().startswith(f"error: rank 0: NCCL communicator creation (ncclCommInitRank, rank 0 of 2, "
                                     f"id {digest}) did not finish in 0 s")
    assert not (tmp_path / "nccl.id").exists()  # rank 0 removes the id once every rank joined
    communicator.abort()  # a failed rank aborts: destroy would wait for the peers
    communicator.abort()
    communicator.destroy()
    assert nccl.calls[1:] == [("abort", "comm")]


def test_collectives_go_before_the_launch_at_their_place():
    assert in_order(["a", "b", "c"], [1, 1, 3], ["x", "y", "z"]) == ["a", "x", "y", "b", "c", "z"]
    assert in_order(["a"], [0], ["x"]) == ["x", "a"]


@pytest.mark.parametrize("config, ranks", [(LLAMA, 4), (KIMI_LINEAR, 2)])
def test_each_ranks_program_is_rank_0s_repointed(config, ranks):
    """What the runtime derives from the plan's rank-0 program is the shard pass's own rank step
    (Llama's 2 kv heads over 4 ranks: two ranks a kv head)."""
    zero = program_of(rank_step(config, ranks, 0, fused=True))
    for rank in range(1, ranks):
        assert parallel.rank_program(zero, rank, ranks) == program_of(rank_step(config, ranks, rank, fused=True))
    unsharded = program_of(build(config))
    assert any(s.shard for s in zero.states)
    whole = parallel.whole_program(zero)
    assert [(s.name, s.shape, s.shard) for s in whole.states] == [(s.name, s.shape, "") for s in unsharded.states]
    assert {w.name: w.shape for w in whole.weights} == {w.name: w.shape for w in unsharded.weights}


def test_the_ranks_on_the_interpreter_compute_the_one_rank_plans_step(plans):
    """Each rank's environment is its slice of the one-GPU plan's (same inputs, the same seeded
    weights sliced), and the ranks' step run together equals the one-GPU plan's step."""
    options = Options(check=True, seed=3)
    plan, program, env, _ = runner.load(plans[1], options)
    want = program.run(env.copy())
    sharded = Plan.read(plans[2])
    zero = program_of_plan(sharded)
    programs, envs = parallel.environments(sharded, zero, options, [0, 1])
    for rank_env, rank_program in zip(envs, programs, strict=True):
        for name, values in rank_env.inputs.items():
            np.testing.assert_array_equal(values, env.inputs[name])
        for decl in rank_program.weights:
            expected = Shard.parse(decl.shard).slice(env.weights[decl.name], decl.name) if decl.shard \
                else env.weights[decl.name]
            np.testing.assert_array_equal(rank_env.weights[decl.name], expected)
    assert programs[1].weights != programs[0].weights  # rank 1 holds other slices
    got = run_ranks(programs, envs)
    scale = float(np.abs(want[1]).max())
    assert scale > 1e-2
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-5 * scale)
    np.testing.assert_array_equal(got[0], want[0])


def program_of_plan(plan: Plan):
    from lanec.interp.program import Program

    return Program.from_json(plan.program)


def test_a_missing_nccl4py_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "nccl", None)  # import nccl raises ImportError
    monkeypatch.setitem(sys.modules, "nccl.bindings", None)
    with pytest.raises(DeviceError, match="^nccl4py is not installed"):
        collectives.bindings()


def test_rank_0_hands_its_id_through_a_file(tmp_path, monkeypatch):
    monkeypatch.setattr(collectives, "bindings", lambda: type("N", (), {"get_unique_id": lambda: b"\x07" * 128}))
    path = tmp_path / "nccl.id"
    assert collectives.share_unique_id(0, path) == b"\x07" * 128
    assert collectives.share_unique_id(1, path) == b"\x07" * 128
    path.unlink()
    with pytest.raises(DeviceError, match="rank 1 waited 0 s for rank 0's NCCL id"):
        collectives.share_unique_id(1, path, wait_s=0.1)


def test_nccl4py_is_an_optional_extra_imported_only_by_a_multi_rank_run():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    tp = project["optional-dependencies"]["tp"]
    assert any(d.startswith("nccl4py") and "==" in d for d in tp)
    everywhere = project["dependencies"] + project["optional-dependencies"]["dev"]
    assert not any("nccl" in d for d in everywhere)  # CI has no GPU: never installed there
    code = ("import sys; import lanec.runtime.runner, lanec.runtime.parallel, lanec.runtime.collectives, lanec.cli; "
            "print(any(m == 'nccl' or m.startswith('nccl.') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "False"


def test_the_whl_tp_folder_is_ignored():
    assert "/.whl-tp/" in (ROOT / ".gitignore").read_text().splitlines()


def test_a_collective_names_its_buffers():
    collective = Collective("all_reduce x", 1, Arg("p"), Arg("x"), 4, "float32")
    assert Collective.from_json(collective.to_json()) == collective


def test_run_within_kills_the_whole_session_past_its_deadline():
    import os
    import sys
    import time

    from lanec.runtime.parallel import run_within

    done = run_within([sys.executable, "-c", "print('ranks done')"], 30, os.environ)
    assert done.returncode == 0 and done.stdout.strip() == "ranks done"
    child = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
             "print('launched', flush=True); time.sleep(60)")
    started = time.monotonic()
    done = run_within([sys.executable, "-c", child], 2, os.environ)
    assert done.returncode is None and "launched" in done.stdout
    assert time.monotonic() - started < 20  # the grandchild holding the pipe was killed too


def test_a_plan_for_more_ranks_than_gpus_is_refused_before_any_rank_starts(plans, monkeypatch):
    from lanec.runtime import driver

    monkeypatch.setattr(parallel, "launch_ranks", lambda *args, **kwargs: pytest.fail("a rank was started"))
    monkeypatch.setattr(driver, "device_count", lambda: 1)
    with pytest.raises(RunError) as error:
        parallel.execute(plans[2], Options(), print, {})
    message = str(error.value)
    assert "is a plan for 2 ranks, one a GPU; this machine has 1 GPU (compile it with --tp 1 to run here)" in message
    assert "\n" not in message


def test_where_the_gpus_cannot_be_counted_the_ranks_start_and_say_why(plans, monkeypatch):
    from lanec.runtime import driver

    def no_driver():
        raise driver.DeviceError("no NVIDIA driver on this machine")

    started = []
    monkeypatch.setattr(driver, "device_count", no_driver)
    monkeypatch.setattr(parallel, "launch_ranks", lambda path, options, ranks, say, **kw: started.append(ranks) or 0)
    assert parallel.execute(plans[2], Options(), print, {}) == 0 and started == [2]
