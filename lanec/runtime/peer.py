"""The one-shot all-reduce's memory: every rank's region of its own GPU memory, mapped into every
other rank's process (CUDA IPC), so a kernel on one GPU reads and signals the others' over NVLink.

A plan for N ranks carries, beside each all-reduce small enough (`ONESHOT_MAX_BYTES`), a
`all_reduce_oneshot` kernel (lanec/codegen/kernels/all_reduce.py). Each of the plan's all-reduces
that has one gets a region of `PeerLayout.total` bytes in each rank's block:

    workspace [2, bytes]         the rank's values of this step, in the half of the step's parity
    flags     [ctas, ranks] i32  flag (c, p): the last step whose chunk c rank p has staged
    epoch     [ctas] i32         this rank's step count, chunk by chunk (its own, never read by peers)

A step of the kernel on rank r, CTA c: stage chunk c of the values into r's workspace half
(epoch & 1), then at every rank p set flag (c, r) to the epoch (a release at system scope), wait
until every flag (c, p) of r's own block reaches it (an acquire), and sum chunk c of every rank's
half in rank order, 0 to N-1, in fp32: every rank computes the same bits. Two halves suffice: a rank
that reaches step e + 2 saw every peer's flag of step e + 1, which a peer raises only after its
step e (and so its reads of step e's half) finished.

`PeerMemory` makes the block (cuMemAlloc, zeroed), shares its IPC handle with the others through
one NCCL all-gather (which also orders every rank's zeroing before any peer's first flag), and
opens theirs; `close` unmaps them behind a barrier so that no rank frees memory a peer still reads.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from lanec.runtime import dtypes
from lanec.runtime.driver import Buffer, DeviceError, check, cu

# larger all-reduces stay NCCL's: the one-shot reads every rank's whole message over NVLink, so it
# is bandwidth-bound where NCCL's ring reads a share a rank (measured to 256 KB on 2 x H200: the
# one-shot 1.5x faster there; not yet measured near this limit)
ONESHOT_MAX_BYTES = 1 << 20
ONESHOT_THREADS = 512
ONESHOT_MAX_CTAS = 32
ONESHOT_MAX_RANKS = 8
VECTOR_BYTES = 16
HANDLE_BYTES = 64  # sizeof(CUipcMemHandle)


def _up(n: int, to: int = VECTOR_BYTES) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class PeerLayout:
    """One all-reduce's region in every rank's block (module docstring); `problems()` names the
    facts that keep an all-reduce on NCCL. With `rows`, the all-reduce fused with the norm that
    reads it (`all_reduce_norm`): CTA c owns row c, not a chunk, and so do its flags and epoch."""

    count: int
    dtype: str
    ranks: int
    rows: int = 0

    @property
    def bytes(self) -> int:
        return self.count * dtypes.storage(self.dtype).itemsize

    def problems(self) -> list[str]:
        found = []
        if self.dtype not in ("bfloat16", "float32"):
            found.append(f"it sums {self.dtype} (the one-shot sums bfloat16 or float32)")
        if not 2 <= self.ranks <= ONESHOT_MAX_RANKS:
            found.append(f"{self.ranks} ranks (the one-shot reads 2 to {ONESHOT_MAX_RANKS} peers)")
        if self.count < 1 or self.bytes % VECTOR_BYTES:
            found.append(f"{self.count} values are not whole {VECTOR_BYTES}-byte vectors")
        if self.bytes > ONESHOT_MAX_BYTES:
            found.append(f"{self.bytes} bytes pass the one-shot's limit of {ONESHOT_MAX_BYTES}")
        if self.rows and (self.count % self.rows or (self.bytes // self.rows) % VECTOR_BYTES):
            found.append(f"{self.count} values are not {self.rows} rows of whole {VECTOR_BYTES}-byte vectors")
        return found

    @property
    def vectors(self) -> int:
        return self.bytes // VECTOR_BYTES

    @property
    def ctas(self) -> int:
        if self.rows:
            return self.rows
        return max(1, min(ONESHOT_MAX_CTAS, math.ceil(self.vectors / ONESHOT_THREADS)))

    @property
    def flags(self) -> int:
        return 2 * self.bytes

    @property
    def epoch(self) -> int:
        return self.flags + _up(4 * self.ctas * self.ranks)

    @property
    def total(self) -> int:
        return self.epoch + _up(4 * self.ctas)


def table(rank: int, bases: list[int]) -> np.ndarray:
    """The kernel's `peers` param: int32 words [rank, 0, low, high of rank 0's region, ...]."""
    words = [rank, 0]
    for base in bases:
        words += [base & 0xFFFFFFFF, base >> 32]
    return np.array(words, dtype=np.uint32).view(np.int32)


class PeerMemory:
    """This rank's block of `nbytes`, zeroed, and every rank's block mapped here (`bases[p]`)."""

    def __init__(self, communicator, nbytes: int, stream):
        self.rank, self.ranks = communicator.rank, communicator.ranks
        self.own = Buffer.empty(nbytes)
        self.own.fill(0)
        handle = check(cu.cuIpcGetMemHandle(self.own.ptr), "cuIpcGetMemHandle (the one-shot all-reduce's memory)")
        mine = np.frombuffer(ctypes.string_at(handle.getPtr(), HANDLE_BYTES), dtype=np.uint8)
        handles = communicator.all_gather_bytes(mine, stream)
        self.opened: list[int] = []
        self.bases: list[int] = []
        for peer in range(self.ranks):
            if peer == self.rank:
                self.bases.append(self.own.ptr)
                continue
            other = cu.CUipcMemHandle()
            ctypes.memmove(other.getPtr(), handles[peer].tobytes(), HANDLE_BYTES)
            flags = cu.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
            pointer = int(check(cu.cuIpcOpenMemHandle(other, flags), f"cuIpcOpenMemHandle (rank {peer}'s memory)"))
            self.opened.append(pointer)
            self.bases.append(pointer)

    def close(self, barrier) -> None:
        """Unmap the peers' blocks, then free ours once every rank has unmapped it (`barrier()`
        returns when every rank reached it)."""
        barrier()
        while self.opened:
            check(cu.cuIpcCloseMemHandle(self.opened.pop()), "cuIpcCloseMemHandle")
        barrier()
        self.own.free()


def check_layout(layout: PeerLayout) -> None:
    problems = layout.problems()
    if problems:
        raise DeviceError(f"the one-shot all-reduce of {layout.count} {layout.dtype} over {layout.ranks} ranks: "
                          + "; ".join(problems))
