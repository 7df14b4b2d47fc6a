"""A plan for N ranks on N GPUs (`lanec compile --tp N`, then `lanec run`): one process a GPU.

`lanec run plan.bin [--tp N]` with no launcher around it starts the N rank processes itself
(rank r on GPU r, each `python -m lanec.runtime` with RANK / WORLD_SIZE / LOCAL_RANK set, its
stdout and stderr in log files of its own), waits for them, prints rank 0's lines and reports a
failing rank's one-line error with its rank. No wait is endless: a rank waits on the others at
most LANEC_TP_TIMEOUT seconds a phase (its watchdog ends it with a line naming the phase), the
launcher stops every rank when one outlives that, and a rank dies with its launcher. Under
torchrun or mpirun (their RANK / WORLD_SIZE / LOCAL_RANK, OMPI_COMM_WORLD_*, or PMI_* variables)
the process is one rank, on GPU LOCAL_RANK. A plan for N ranks run on another count is a one-line
error.

The plan holds rank 0's step; rank r's is the same step with every weight and state re-pointed to
rank r's slice (`Shard.for_rank`, the shard pass's own rule). Every rank makes the whole model's
environment (its seeded or checkpoint weights at their whole shapes, the whole states and inputs
from the seed: what one GPU's plan of the unsharded form gets) and takes its slices of it, so the
N ranks compute the model one GPU computes. `--check` runs every rank's step on the interpreter
with a simulated all-reduce (`lanec.interp.tp.run_ranks`) and compares this rank's outputs and
states with it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from lanec.runtime import driver, weights
from lanec.runtime.plan import Plan, Source

# (launcher, rank variable, size variable, local rank variable), first match wins
LAUNCHERS = (("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
             ("mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
             ("mpirun (MPICH)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"))
ID_VARIABLE = "LANEC_TP_ID"  # the file through which rank 0 hands the NCCL id to the others
PHASES_VARIABLE = "LANEC_TP_PHASES"  # set by the launcher: a rank marks its phases in its log
LOGS_VARIABLE = "LANEC_TP_LOGS"  # where the launcher keeps the ranks' logs (default: a temporary folder,
# removed when every rank succeeded)
# what names one launch of a job where LANEC_TP_ID is not given (torchrun's rendezvous, MPI's job)
JOB_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid",
                 "PMI_PORT")
GRACE_S = 10.0  # after a rank fails, how long the others get before they are stopped


def run_error(message: str) -> Exception:
    from lanec.runtime.runner import RunError

    return RunError(message)


@dataclass(frozen=True)
class Rank:
    """This process's place: rank `rank` of `ranks`, on GPU `device`, the NCCL id shared through `id_file`."""

    rank: int
    ranks: int
    device: int
    id_file: Path
    launcher: str


def rank_of(environ: Mapping[str, str]) -> Rank | None:
    """The rank a launcher set in `environ`, or None where none did."""
    for launcher, rank_name, size_name, local_name in LAUNCHERS:
        if size_name not in environ:
            continue
        values = {}
        for name in (rank_name, size_name, local_name):
            text = environ.get(name, environ.get(rank_name) if name == local_name else None)
            if text is None:
                raise run_error(f"{launcher}: {size_name} is set but {name} is not")
            try:
                values[name] = int(text)
            except ValueError:
                raise run_error(f"{launcher}: {name}={text!r} is not a number") from None
        rank, size, local = values[rank_name], values[size_name], values[local_name]
        if size < 1 or not 0 <= rank < size or local < 0:
            raise run_error(f"{launcher}: rank {rank} of {size} (local rank {local}) is not a rank of the job")
        return Rank(rank, size, local, id_file(environ), launcher)
    return None


def id_file(environ: Mapping[str, str]) -> Path:
    """Where rank 0 writes the NCCL id: LANEC_TP_ID, else a file named by the job's launch variables
    in the temporary folder (every rank on one machine reaches it)."""
    if environ.get(ID_VARIABLE):
        return Path(environ[ID_VARIABLE])
    job = [environ[name] for name in JOB_VARIABLES if environ.get(name)]
    if not job:
        return Path("")  # only a one-rank job gets here: it shares no id
    key = re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(job)).strip("-")
    return Path(tempfile.gettempdir()) / f"lanec-nccl-{key}.id"


def ranks_to_run(path: str | Path, plan: Plan, options, rank: Rank | None) -> int:
    """The ranks asked for (--tp, else the launcher's, else the plan's), which must be the plan's."""
    asked = options.tp if options.tp is not None else (rank.ranks if rank is not None else plan.ranks)
    if asked < 1:
        raise run_error(f"--tp {asked}: at least 1 rank")
    if rank is not None and rank.ranks != asked:
        raise run_error(f"--tp {asked}, but {rank.launcher} started {rank.ranks} ranks")
    if asked != plan.ranks:
        compiled = f"`lanec compile --tp {plan.ranks}`" if plan.ranks > 1 else "compiled without --tp"
        raise run_error(f"{path} is a plan for {plan.ranks} rank{'s' * (plan.ranks > 1)} ({compiled}); "
                        f"run on {asked}: compile it with --tp {asked}")
    if plan.ranks > 1:
        refused = [flag for flag, given in (("--interpret", options.interpret), ("--profile", options.profile),
                                            ("--trace", options.trace is not None),
                                            ("--serve", options.serve is not None)) if given]
        if refused:
            raise run_error(f"{refused[0]} runs a plan for one GPU; {path} is a plan for {plan.ranks} ranks "
                            "(--check and timing run it)")
    return asked


# -- each rank's step, from rank 0's ---------------------------------------------------------------


def re_pointed(item, rank: int, ranks: int):
    """A declaration or weight source of rank 0's step (its `shard`, rank 0's part) as rank `rank`
    holds it (`Shard.for_rank`, the shard pass's own rule); unchanged where it is whole."""
    from lanec.interp.tp import Shard

    return replace(item, shard=Shard.parse(item.shard).for_rank(rank, ranks).text) if item.shard else item


def rank_program(program, rank: int, ranks: int):
    """Rank `rank`'s program: rank 0's with each sharded weight and state re-pointed to its slice."""
    return replace(program, weights=[re_pointed(w, rank, ranks) for w in program.weights],
                   states=[re_pointed(s, rank, ranks) for s in program.states])


def rank_plan(plan: Plan, rank: int) -> Plan:
    """Rank `rank`'s plan: rank 0's with each weight source's part re-pointed to the rank's (what
    the GPU's seeders make; the host's `weights.make` reads sources by name)."""
    return replace(plan, weights=[replace(b, sources=tuple(re_pointed(s, rank, plan.ranks) for s in b.sources))
                                  for b in plan.weights])


class RankSources(Mapping):
    """A rank's weight sources by name, each its part (`shards`: name -> shard text, "" where
    whole) of the whole model's (lazy) source, made when asked: on a rank whose GPU seeds its
    weights, only the bindings the seeders cannot place."""

    def __init__(self, whole: Mapping, shards: Mapping[str, str]):
        self._whole = whole
        self._shards = dict(shards)

    def __getitem__(self, name: str):
        import numpy as np

        from lanec.interp.tp import sliced

        return sliced(np.asarray(self._whole[name]), self._shards.get(name, ""), f"weight '{name}'")

    def __iter__(self):
        return iter(self._shards)

    def __len__(self) -> int:
        return len(self._shards)


def whole_program(program):
    """The program's declarations at the whole model's shapes (its steps unchanged): what the
    environment is drawn for, exactly as for the unsharded step."""
    from lanec.interp.tp import Shard

    def whole(decl):
        return replace(decl, shape=Shard.parse(decl.shard).whole(decl.shape), shard="") if decl.shard else decl

    return replace(program, weights=[whole(w) for w in program.weights], states=[whole(s) for s in program.states])


def whole_source(source: Source) -> Source:
    from lanec.interp.tp import Shard

    if not source.shard:
        return source
    return replace(source, shape=tuple(Shard.parse(source.shard).whole(source.shape)), shard="")


def whole_sources(plan: Plan, seed: int, checkpoint=None, lazy: bool = False) -> dict:
    """Every weight source at its whole shape: the checkpoint's tensor, or the seeded values the
    whole tensor has (each value a function of its index in the whole: `lanec.runtime.seeded`;
    `lazy`: made only where read)."""
    bindings = [replace(b, sources=tuple(whole_source(s) for s in b.sources)) for b in plan.weights]
    return weights.sources(replace(plan, weights=bindings), seed, checkpoint, lazy=lazy)


def environments(plan: Plan, program, options, ranks: list[int], lazy: bool = False):
    """The rank programs and environments of `ranks` (slices of the whole model's environment).
    `lazy` (a timed rank whose GPU seeds its weights): the host makes no weight up front; each
    environment's weights are a `RankSources`, a part made only where the host binds it."""
    from lanec.interp.environment import Environment, random_environment
    from lanec.interp.tp import rank_environment, sliced
    from lanec.runtime.runner import served_inputs, validate_inputs

    checkpoint = weights.open_checkpoint(options.weights) if options.weights is not None else None
    whole = whole_program(program)
    sources = whole_sources(plan, options.seed, checkpoint, lazy=lazy)
    env = random_environment(whole, options.seed, weights=sources)
    if options.context is not None:
        env.inputs.update(served_inputs(whole, options.context, options.seed))
    validate_inputs(whole, env.inputs)
    programs = [rank_program(program, r, plan.ranks) for r in ranks]
    if not lazy:
        return programs, [rank_environment(env, p) for p in programs]
    return programs, [Environment({k: v.copy() for k, v in env.inputs.items()},
                                  RankSources(sources, {w.name: w.shard for w in p.weights}),
                                  {s.name: sliced(env.states[s.name], s.shard, f"state '{s.name}'") for s in p.states})
                      for p in programs]


def run_rank(path: str | Path, plan: Plan, options, rank: Rank, say: Callable[[str], None],
             environ: Mapping[str, str] | None = None) -> int:
    """This process's rank: its step on its GPU with NCCL, checked against every rank's step on
    the interpreter, or timed. Every phase that waits on the other ranks runs under a deadline
    (LANEC_TP_TIMEOUT, `collectives.Watchdog`); a rank that fails aborts its communicator, so
    the error reaches its launcher instead of a wait for peers that will never come."""
    from lanec.interp.program import Program
    from lanec.runtime.collectives import Communicator, Watchdog, timeout_s
    from lanec.runtime.runner import Session, gpu_routing, judge, seeded_on_gpu, timings

    environ = os.environ if environ is None else environ
    if not plan.program:
        raise run_error(f"{path} carries no interpreter program: recompile it with this lanec")
    watchdog = Watchdog(rank.rank, timeout_s(environ), marks=bool(environ.get(PHASES_VARIABLE)))
    program = Program.from_json(plan.program)
    everyone = list(range(plan.ranks)) if options.check else [rank.rank]
    seed = seeded_on_gpu(plan, options)  # the rank's parts of the seeded weights made on its GPU
    programs, envs = environments(plan, program, options, everyone, lazy=seed is not None and not options.check)
    mine = everyone.index(rank.rank)
    driver.Device(rank.device)  # its context current: NCCL joins on this GPU
    communicator = Communicator.join(rank.rank, rank.ranks, rank.id_file, watchdog)
    session = None
    try:
        env = envs[mine]
        session = Session(rank_plan(plan, rank.rank), env, env.weights, pdl=options.pdl, seed=seed, device=rank.device,
                          communicator=communicator)
        if not options.check:
            with watchdog.phase("the timed steps (each all-reduce waits for every rank)"):
                status = timings(session, options, say)
        else:
            with watchdog.phase("the first step (NCCL connects the ranks at the first all-reduces)"):
                session.step_function(options.graph)()
                session.stream.synchronize()
            from lanec.interp.tp import run_ranks

            reference = [e.copy() for e in envs]
            values: list[dict] = [{} for _ in programs]
            outputs = run_ranks(programs, reference, storage=True, values=values,
                                routing=gpu_routing(session, programs[mine]))
            kept = options if rank.rank == 0 else replace(options, outputs=None)
            status = judge(session, programs[mine], outputs, reference[mine].states, values[mine], kept, say)
    except BaseException:
        try:
            if session is not None:
                session.release_graphs(wait=False)  # the abort, too, waits for the graphs holding the communicator
            communicator.abort()
        except driver.DeviceError:
            pass  # the first error is the one to report
        raise
    session.release_graphs()  # ncclCommDestroy waits until no captured graph holds the communicator
    with watchdog.phase("the one-shot all-reduce's memory unmapped (every rank's barrier)"):
        session.close_peers(lambda: communicator.barrier(session.stream))
    with watchdog.phase("NCCL communicator teardown (ncclCommDestroy waits for every rank)"):
        communicator.destroy()
    return status


def execute(path: str | Path, options, say: Callable[[str], None],
            environ: Mapping[str, str] | None = None) -> int | None:
    """Run a plan for several ranks, as a rank of a launcher or by starting the ranks; None where
    the plan is for one GPU and no launcher asks for more (the caller runs it)."""
    environ = os.environ if environ is None else environ
    plan = Plan.read(path)
    rank = rank_of(environ)
    ranks_to_run(path, plan, options, rank)
    if plan.ranks == 1:
        return None
    if rank is None:
        check_gpus(path, plan.ranks)
        return launch_ranks(path, options, plan.ranks, say, environ=environ)
    if rank.rank == 0:
        return run_rank(path, plan, options, rank, say, environ)
    lines: list[str] = []  # another rank prints nothing but, where it fails, its verdict (to stderr)
    status = run_rank(path, plan, options, rank, lines.append, environ)
    if status and lines:
        print(lines[-1], file=sys.stderr)
    return status


# -- starting the ranks ----------------------------------------------------------------------------


def check_gpus(path: str | Path, ranks: int) -> None:
    """Refuse, before any rank starts, a plan for more ranks than this machine has GPUs (one rank a
    GPU). Where the GPUs cannot be counted (no driver) the ranks say so themselves."""
    from lanec.runtime import driver

    try:
        count = driver.device_count()
    except driver.DeviceError:
        return
    if count < ranks:
        raise run_error(f"{path} is a plan for {ranks} ranks, one a GPU; this machine has {count} "
                        f"GPU{'s' if count != 1 else ''} (compile it with --tp {count} to run here)")


def rank_command(path: str | Path, options, ranks: int) -> list[str]:
    """The command line of one rank (`python -m lanec.runtime`, argparse's), from `options`."""
    args = [str(path), "--tp", str(ranks), "--steps", str(options.steps), "--seed", str(options.seed),
            "--repeats", str(options.repeats)]
    for flag, given in (("--check", options.check), ("--no-graph", not options.graph), ("--no-pdl", not options.pdl)):
        if given:
            args.append(flag)
    for flag, value in (("--weights", options.weights), ("--outputs", options.outputs), ("--context", options.context)):
        if value is not None:
            args += [flag, str(value)]
    return [sys.executable, "-m", "lanec.runtime", *args]


def rank_environ(environ: Mapping[str, str], rank: int, ranks: int, folder: Path) -> dict[str, str]:
    """A started rank's environment: torchrun's variables, the NCCL id file in `folder`, this lanec
    importable, its phases marked in its log (LANEC_TP_PHASES), its lines written as they come,
    and NCCL's warnings on (NCCL_DEBUG=WARN, unless set). The rest of `environ` passes as it is
    (NCCL_NVLS_ENABLE=0 among it, where a machine sets it)."""
    here = str(Path(__file__).resolve().parents[2])
    path = environ.get("PYTHONPATH", "")
    return {"NCCL_DEBUG": "WARN", **environ, "RANK": str(rank), "WORLD_SIZE": str(ranks), "LOCAL_RANK": str(rank),
            ID_VARIABLE: str(folder / "nccl.id"), PHASES_VARIABLE: "1", "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": here + (os.pathsep + path if path else "")}


def failure_line(text: str) -> str:
    """A rank's last line on stderr that is not one of its phase marks."""
    from lanec.runtime.collectives import PHASE_MARK

    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith(PHASE_MARK)]
    return lines[-1] if lines else ""


class RankLog:
    """What the launcher knows of one rank from its log files (`rank<r>.err`, `rank<r>.out`): the
    phase it waits in, from its PHASE_MARK lines, and since when the launcher saw it there."""

    def __init__(self, folder: Path, rank: int):
        self.rank = rank
        self.err, self.out = folder / f"rank{rank}.err", folder / f"rank{rank}.out"
        self.phase: str | None = None
        self.since = 0.0
        self._read = 0
        self._partial = ""

    def update(self, now: float) -> None:
        """Read what the rank wrote to stderr since the last call."""
        from lanec.runtime.collectives import PHASE_MARK

        try:
            with open(self.err, "rb") as handle:
                handle.seek(self._read)
                data = handle.read()
        except OSError:
            return
        self._read += len(data)
        *lines, self._partial = (self._partial + data.decode(errors="replace")).split("\n")
        for line in lines:
            if not line.startswith(PHASE_MARK):
                continue
            _rank, _, state = line.removeprefix(PHASE_MARK).partition(" waits: ")
            if state:
                self.phase, self.since = state, now
            elif " done: " in line:
                self.phase = None

    def tail(self, lines: int = 8) -> list[str]:
        """The last lines of its stderr and stdout (NCCL writes its warnings to stdout)."""
        shown = []
        for path in (self.err, self.out):
            try:
                text = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            shown += [f"  {path.name}: {line}" for line in text[-lines:]]
        return shown


def die_with(parent: int) -> Callable[[], None]:
    """A started rank's preexec: the kernel kills it when its launcher dies (PR_SET_PDEATHSIG), so a
    launcher killed by a timeout leaves no rank holding a GPU. Everything it calls is bound before
    the fork (no import runs in the child)."""
    import ctypes
    import signal

    prctl, kill = ctypes.CDLL(None, use_errno=True).prctl, int(signal.SIGKILL)

    def arm() -> None:
        prctl(1, kill)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the launcher died before the call
            os._exit(1)

    return arm


def run_within(command: list[str], timeout_s: float, environ: Mapping[str, str], cwd: str | Path | None = None
               ) -> subprocess.CompletedProcess:
    """`command` (a `lanec run` of a plan for several ranks: the launcher and its ranks) in a process
    session of its own, its output collected; past `timeout_s` the whole session is killed (no rank
    left holding a GPU) and the result's returncode is None."""
    import signal

    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                          env=dict(environ), start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            return subprocess.CompletedProcess(command, None, out, err)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def launch_ranks(path: str | Path, options, ranks: int, say: Callable[[str], None],
                 command: Callable[[int], list[str]] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Start `ranks` rank processes, each writing to its own log files (never a pipe), wait for
    them, say rank 0's lines, and report a failing rank's last line with its rank: an error as
    one RunError line, a check that disagrees beside rank 0's verdict. A rank that fails leaves
    the others GRACE_S, then they are stopped (they would wait for it in NCCL); a rank that waits
    in one phase past LANEC_TP_TIMEOUT (its own watchdog ends it then) is stopped with all the
    others a little later. On any failure the ranks' last lines go to stderr and their logs stay in
    a folder the error names (LANEC_TP_LOGS chooses it, and keeps it on success too). Returns the
    worst exit status."""
    from lanec.runtime.collectives import BACKSTOP_S, timeout_s

    environ = os.environ if environ is None else environ
    command = command or (lambda rank: rank_command(path, options, ranks))
    deadline_s = timeout_s(environ) + BACKSTOP_S + GRACE_S
    kept = bool(environ.get(LOGS_VARIABLE))
    folder = Path(environ[LOGS_VARIABLE]) if kept else Path(tempfile.mkdtemp(prefix="lanec-tp-"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise run_error(f"{LOGS_VARIABLE}={folder}: cannot make the folder for the ranks' logs ({error.strerror})") \
            from None
    (folder / "nccl.id").unlink(missing_ok=True)  # a kept folder's id is an earlier run's
    logs = [RankLog(folder, rank) for rank in range(ranks)]
    processes: list[subprocess.Popen] = []
    stopped: set[int] = set()
    stuck: tuple[int, str, float] | None = None
    preexec = die_with(os.getpid()) if sys.platform.startswith("linux") else None
    try:
        for rank in range(ranks):
            with open(logs[rank].out, "w") as out, open(logs[rank].err, "w") as err:
                processes.append(subprocess.Popen(command(rank), env=rank_environ(environ, rank, ranks, folder),
                                                  stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                                  preexec_fn=preexec))
        failed_at = None
        while True:
            codes = [p.poll() for p in processes]  # every rank polled: `any` over poll() would stop at rank 0
            if all(code is not None for code in codes):
                break
            now = time.monotonic()
            for log in logs:
                log.update(now)
            if failed_at is None and any(code not in (None, 0) for code in codes):
                failed_at = now
            waiting = [log for log, p in zip(logs, processes) if p.returncode is None and log.phase is not None]
            late = [log for log in waiting if now - log.since > deadline_s]
            if late:
                stuck = (late[0].rank, late[0].phase or "", now - late[0].since)
            if late or (failed_at is not None and now - failed_at > GRACE_S):
                for rank, process in enumerate(processes):
                    if process.poll() is None:
                        process.kill()
                        stopped.add(rank)
                break
            time.sleep(0.05)
    finally:
        for rank, process in enumerate(processes):
            if process.poll() is None:  # interrupted: leave no rank behind
                process.kill()
                stopped.add(rank)
            process.wait()
    for log in logs:
        log.update(time.monotonic())
    for line in logs[0].out.read_text().splitlines():
        say(line)
    errors, status = [], 0
    if stuck is not None:
        rank, phase, waited = stuck
        errors.append(f"rank {rank}: {phase} did not finish in {waited:.0f} s and the rank did not end itself: "
                      "the launcher stopped every rank")
    for rank, process in enumerate(processes):
        code = process.returncode
        if code == 0 or rank in stopped:
            continue
        line = failure_line(logs[rank].err.read_text())
        status = max(status, code if code > 0 else 1)
        if code == 1 and line.startswith("check:"):
            if rank:  # rank 0's verdict is among its lines already
                say(f"rank {rank}: {line}")
        else:
            why = line.removeprefix("error: ") if line else (f"killed by signal {-code}" if code < 0
                                                             else f"exited with status {code}")
            errors.append(why if why.startswith((f"rank {rank}:", f"rank {rank} ")) else f"rank {rank}: {why}")
    if not errors and not stopped:
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)
        return status
    for log, process in zip(logs, processes):
        if process.returncode != 0 or log.rank in stopped:
            print(f"rank {log.rank}'s last lines:", *log.tail(), sep="\n", file=sys.stderr)
    where = "; ".join(f"rank {log.rank} was in {log.phase}" for log in logs
                      if log.rank in stopped and log.phase and (stuck is None or log.rank != stuck[0]))
    where = f" ({where})" if where else ""
    if errors:
        more = f" (and {len(errors) - 1} more ranks failed)" if len(errors) > 1 else ""
        raise run_error(f"{errors[0]}{more}{where}; the ranks' logs: {folder}")
    raise run_error(f"ranks {', '.join(map(str, sorted(stopped)))} stopped {GRACE_S:.0f} s after another "
                    f"failed{where}; the ranks' logs: {folder}")
