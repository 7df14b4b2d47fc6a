"""NCCL for a plan's all-reduces, through nccl4py (`pip install 'lanec[tp]'`), imported only here
and only where a plan for several ranks runs: a machine without it runs every one-rank plan.

We call nccl4py's bindings layer (`nccl.bindings.nccl`) rather than its `Communicator` class: our
buffers are raw device addresses of bf16 or fp32 values, which the bindings take as they are (the
class reads typed arrays through DLPack), and `ncclCommInitRank` there needs no newer NCCL than
the one torch ships. The communicator is made with the rank's device current (`driver.Device`),
and every all-reduce is enqueued on the step's stream, so stream capture puts it in the graph.

Rank 0 makes the NCCL unique id and writes it to a file every rank can read (`LANEC_TP_ID`, or
the one `lanec run --tp N` makes); the others wait for it. Once every rank joined, rank 0 removes it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from lanec.runtime.driver import DeviceError, Stream

ID_BYTES = 128  # sizeof(ncclUniqueId)
DTYPES = {"bfloat16": "Bfloat16", "float32": "Float32"}  # our dtype -> nccl4py's DataType member
WAIT_S = 120.0  # how long a rank waits for rank 0's id


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


def share_unique_id(rank: int, path: Path, wait_s: float = WAIT_S) -> bytes:
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
    def join(cls, rank: int, ranks: int, id_file: Path) -> Communicator:
        """Every rank's communicator, the id shared through `id_file` (removed once all joined)."""
        communicator = cls(rank, ranks, share_unique_id(rank, id_file))
        if rank == 0:
            id_file.unlink(missing_ok=True)
        return communicator

    def all_reduce(self, source: int, target: int, count: int, dtype: str, stream: Stream,
                   name: str = "all_reduce") -> AllReduce:
        return AllReduce(self, source, target, count, dtype, stream, name)

    def destroy(self) -> None:
        if self.handle is not None:
            _nccl_call("ncclCommDestroy", bindings().comm_destroy, self.handle)
            self.handle = None
