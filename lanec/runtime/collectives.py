"""NCCL for a plan's all-reduces, through nccl4py (`pip install 'lanec[tp]'`), imported only here
and only where a plan for several ranks runs: a machine without it runs every one-rank plan.

We call nccl4py's bindings layer (`nccl.bindings.nccl`) rather than its `Communicator` class: our
buffers are raw device addresses of bf16 or fp32 values, which the bindings take as they are (the
class reads typed arrays through DLPack), and `ncclCommInitRank` there needs no newer NCCL than
the one torch ships. The communicator is made with the rank's device current (`driver.Device`),
and every all-reduce is enqueued on the step's stream, so stream capture puts it in the graph.

Rank 0 makes the NCCL unique id and writes it to a file every rank can read (`LANEC_TP_ID`, or
the one `lanec run --tp N` makes); the others wait for it. Once every rank joined, rank 0 removes it.

An all-reduce the plan carries a one-shot kernel for runs that kernel instead, over the ranks'
memory mapped into each other's processes (`PeerAllReduce`; lanec/runtime/peer.py); NCCL still
makes the communicator, shares the memory handles (`all_gather_bytes`) and keeps the larger sums.

A rank that waits on the others never waits forever: each phase that does (the id exchange,
communicator creation, the steps, teardown) runs under a `Watchdog`, which ends the process with
one line naming the rank and the phase once LANEC_TP_TIMEOUT seconds pass (a peer that failed or
never started leaves NCCL waiting in a call that cannot be interrupted). The communicator stays
blocking: NCCL's non-blocking mode (`config.blocking = 0`) would bound its creation, but it also
makes every later collective return ncclInProgress and finish on a thread of NCCL's own, which a
stream capture on ours cannot take. A rank that fails aborts its communicator (ncclCommAbort)
rather than destroying it, since destroy waits for the peers.
"""

from __future__ import annotations

import faulthandler
import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from lanec.runtime.driver import DeviceError, Stream

ID_BYTES = 128  # sizeof(ncclUniqueId)
DTYPES = {"bfloat16": "Bfloat16", "float32": "Float32"}  # our dtype -> nccl4py's DataType member
TIMEOUT_VARIABLE = "LANEC_TP_TIMEOUT"  # seconds a rank may wait on the others in one phase
TIMEOUT_S = 300.0
TIMED_OUT = 124  # a rank's exit status when its watchdog ended it (timeout(1)'s)
BACKSTOP_S = 30.0  # past the deadline, faulthandler ends a rank whose watchdog thread cannot run
PHASE_MARK = "lanec phase: "  # a rank's progress lines on stderr, which the launcher reads


def timeout_s(environ: Mapping[str, str]) -> float:
    """LANEC_TP_TIMEOUT (seconds, default TIMEOUT_S): how long one phase may wait on the other ranks."""
    text = environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise DeviceError(f"{TIMEOUT_VARIABLE}={text!r}: give the seconds a rank may wait on the others (e.g. 120)")
    return value


class Watchdog:
    """Deadlines on the phases in which rank `rank` waits on the others: a phase still running
    `timeout_s` after it began ends the process (`stop`, os._exit by default) with one line
    `error: rank R: PHASE did not finish in N s ...` on `out`. A daemon thread keeps the time (the
    NCCL and CUDA calls it outlives release the GIL); faulthandler ends the process BACKSTOP_S
    later should that thread never run. With `marks`, each phase's start and end are written to
    `out` as PHASE_MARK lines, for the launcher that reads this rank's log."""

    def __init__(self, rank: int, timeout_s: float, out: TextIO | None = None, marks: bool = False,
                 stop: Callable[[int], object] = os._exit, backstop: bool = True):
        self.rank, self.timeout_s, self.marks = rank, timeout_s, marks
        self._out, self._stop, self._backstop = out, stop, backstop
        self._phase: tuple[str, float] | None = None  # (name, deadline)
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def out(self) -> TextIO:
        return self._out if self._out is not None else sys.stderr

    def _say(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    @contextmanager
    def phase(self, name: str, extra_s: float = 0.0) -> Iterator[None]:
        """Run the block under the deadline (`extra_s` later for a block that bounds its own wait
        and says so better); `name` says what it waits for."""
        if self.marks:
            self._say(f"{PHASE_MARK}rank {self.rank} waits: {name}")
        with self._changed:
            self._phase = (name, time.monotonic() + self.timeout_s + extra_s)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="lanec-tp-watchdog", daemon=True)
                self._thread.start()
            self._changed.notify()
        if self._backstop:
            faulthandler.dump_traceback_later(self.timeout_s + extra_s + BACKSTOP_S, exit=True)
        try:
            yield
        finally:
            if self._backstop:
                faulthandler.cancel_dump_traceback_later()
            with self._changed:
                self._phase = None
                self._changed.notify()
            if self.marks:
                self._say(f"{PHASE_MARK}rank {self.rank} done: {name}")

    def _watch(self) -> None:
        with self._changed:
            while True:
                if self._phase is None:
                    self._changed.wait()
                    continue
                name, deadline = self._phase
                left = deadline - time.monotonic()
                if left > 0:
                    self._changed.wait(left)
                    continue
                self._say(f"error: rank {self.rank}: {name} did not finish in {self.timeout_s:.0f} s: another "
                          f"rank failed, never started or waits elsewhere ({TIMEOUT_VARIABLE} sets the deadline; "
                          "NCCL_DEBUG=INFO says more)")
                self._phase = None
                self._stop(TIMED_OUT)


def bindings():
    """nccl4py's bindings module, or a one-line error saying how to get it."""
    try:
        from nccl.bindings import nccl
    except ImportError:
        raise DeviceError("nccl4py is not installed (pip install 'lanec[tp]'; offline, the wheels "
                          "tests/gpu/tp_wheels.sh downloads): a plan for several ranks needs NCCL") from None
    return nccl


def _nccl_call(what: str, call, *args):
    """A call into NCCL; its failure (or a missing libnccl) as one DeviceError line."""
    try:
        return call(*args)
    except DeviceError:
        raise
    except Exception as error:  # nccl4py's NCCLError, cuda-pathfinder's DynamicLibNotFoundError, ...
        text = " ".join(str(error).split()) or type(error).__name__
        raise DeviceError(f"NCCL {what}: {text}") from None


def share_unique_id(rank: int, path: Path, wait_s: float = TIMEOUT_S) -> bytes:
    """Rank 0 makes the id and writes it to `path` whole (written aside, then renamed); the others
    wait for it."""
    if rank == 0:
        nccl = bindings()
        data = bytes(_nccl_call("ncclGetUniqueId", nccl.get_unique_id))
        aside = path.with_name(path.name + f".{os.getpid()}")
        aside.write_bytes(data)
        os.replace(aside, path)
        return data
    deadline = time.monotonic() + wait_s
    while True:
        try:
            data = path.read_bytes()
        except OSError:
            data = b""
        if len(data) == ID_BYTES:
            return data
        if time.monotonic() > deadline:
            raise DeviceError(f"rank {rank} waited {wait_s:.0f} s for rank 0's NCCL id in {path}: did rank 0 start?")
        time.sleep(0.05)


class AllReduce:
    """One all-reduce (sum) prepared once and enqueued many times on `stream`."""

    def __init__(self, communicator: Communicator, source: int, target: int, count: int, dtype: str,
                 stream: Stream, name: str = "all_reduce"):
        if dtype not in DTYPES:
            raise DeviceError(f"{name}: NCCL sums {' or '.join(DTYPES)} here, not {dtype}")
        nccl = bindings()
        self.name = name
        self._call = nccl.all_reduce
        self._args = (int(source), int(target), int(count), int(getattr(nccl.DataType, DTYPES[dtype])),
                      int(nccl.RedOp.Sum), communicator.handle, int(stream.handle))

    def enqueue(self) -> None:
        _nccl_call(f"all_reduce ({self.name})", self._call, *self._args)


class PeerAllReduce:
    """One all-reduce as the plan's `all_reduce_oneshot` launch over the ranks' mapped memory
    (lanec/runtime/peer.py), prepared once and enqueued many times."""

    def __init__(self, launch, table, name: str = "all_reduce"):
        self.name = name
        self._launch, self._table = launch, table  # the table's buffer lives as long as the launch

    def enqueue(self) -> None:
        self._launch.enqueue()


class Communicator:
    """This process's rank of `ranks` on the current device, joined through `unique_id`."""

    def __init__(self, rank: int, ranks: int, unique_id: bytes):
        nccl = bindings()
        if len(unique_id) != ID_BYTES:
            raise DeviceError(f"an NCCL unique id is {ID_BYTES} bytes, not {len(unique_id)}")
        self.rank, self.ranks = rank, ranks
        comm_id = nccl.UniqueId.from_buffer(bytearray(unique_id))
        self.handle = _nccl_call(f"ncclCommInitRank (rank {rank} of {ranks})", nccl.comm_init_rank, ranks, comm_id,
                                 rank)

    @classmethod
    def join(cls, rank: int, ranks: int, id_file: Path, watchdog: Watchdog) -> Communicator:
        """Every rank's communicator, the id shared through `id_file` (removed once all joined),
        each wait under `watchdog`'s deadline."""
        with watchdog.phase(f"the NCCL id exchange through {id_file}", extra_s=5.0):
            unique_id = share_unique_id(rank, id_file, watchdog.timeout_s)
        digest = hashlib.sha256(unique_id).hexdigest()[:12]  # every rank's log names the id it joined with
        with watchdog.phase(f"NCCL communicator creation (ncclCommInitRank, rank {rank} of {ranks}, id {digest})"):
            communicator = cls(rank, ranks, unique_id)
        if rank == 0:
            id_file.unlink(missing_ok=True)
        return communicator

    def all_reduce(self, source: int, target: int, count: int, dtype: str, stream: Stream,
                   name: str = "all_reduce") -> AllReduce:
        return AllReduce(self, source, target, count, dtype, stream, name)

    def all_gather_bytes(self, mine, stream: Stream):
        """Every rank's `mine` (uint8, the same length on each), rank by rank: [ranks, length]. It
        returns once every rank gave its own, so it also orders what each did before it."""
        import numpy as np

        from lanec.runtime.driver import Buffer

        mine = np.ascontiguousarray(mine, dtype=np.uint8)
        source, target = Buffer.from_array(mine), Buffer.empty(mine.nbytes * self.ranks)
        try:
            nccl = bindings()
            _nccl_call("all_gather", nccl.all_gather, source.ptr, target.ptr, mine.nbytes, int(nccl.DataType.Uint8),
                       self.handle, int(stream.handle))
            stream.synchronize()
            return target.to_array(np.uint8, (self.ranks, mine.nbytes))
        finally:
            source.free()
            target.free()

    def barrier(self, stream: Stream) -> None:
        """Return once every rank called it (an all-gather of 16 bytes: NCCL's LL protocol reads
        its buffers in whole 8-byte words, past a smaller one's end, as compute-sanitizer showed)."""
        import numpy as np

        self.all_gather_bytes(np.zeros(16, dtype=np.uint8), stream)

    def destroy(self) -> None:
        """Free the communicator once every rank is done with it (NCCL waits for the peers)."""
        if self.handle is not None:
            handle, self.handle = self.handle, None
            _nccl_call("ncclCommDestroy", bindings().comm_destroy, handle)

    def abort(self) -> None:
        """Drop the communicator without waiting for the peers: what a rank that failed does."""
        if self.handle is not None:
            handle, self.handle = self.handle, None
            _nccl_call("ncclCommAbort", bindings().comm_abort, handle)
