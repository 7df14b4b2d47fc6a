"""The chain's MoE alignment for batches past SGLang's small-numel kernel: one Triton launch that
fills SGLang's align buffers (sorted token ids, each block's expert, the padded count) from the
router's top-k ids, inside the chain's CUDA graph.

SGLang 0.5.23 aligns with its Triton `moe_align_small_numel` up to 64 (token, expert) pairs and
with a CUDA op of sgl_kernel above that; sgl_kernel is not on the GPU machine, so the chain uses
this kernel there, with the same buffer contract (the anchors' `moe_align_torch.py` states it):
expert e's pairs in bucket e + 1 (bucket 0: filtered, expert -1), every bucket padded to a
multiple of the block size, buckets laid out in order, pad slots below the padded count holding
`numel`, each used block naming its bucket's expert. Within a bucket pairs land in atomic order,
as in the CUDA op (the fused MoE kernel does not care).

One CTA: a histogram of the buckets, their padded runs (a cumulative sum), each block's bucket
(the number of runs ending at or before its first slot), then each pair's place taken with an
atomic add on its bucket's cursor. bench/step_chain.py checks it against the anchors' torch
alignment once, before it times anything."""

from __future__ import annotations

import triton
import triton.language as tl

CHUNK = 16  # blocks placed at a time (a [CHUNK, buckets] comparison)


@triton.jit
def _align(ids, sorted_ids, expert_ids, total_out, cursor, numel, block_size, sorted_size, blocks_size,
           NP: tl.constexpr, BUCKETS: tl.constexpr, BLOCKS: tl.constexpr, CHUNK: tl.constexpr):
    lane = tl.arange(0, NP)
    valid = lane < numel
    # lanes past numel go to the last bucket, which no expert uses, and are dropped from the counts
    bucket = tl.where(valid, tl.load(ids + lane, mask=valid, other=0) + 1, BUCKETS - 1)
    index = tl.arange(0, BUCKETS)
    counts = tl.where(index < BUCKETS - 1, tl.histogram(bucket, BUCKETS), 0)
    padded = (counts + block_size - 1) // block_size * block_size
    ends = tl.cumsum(padded, 0)
    total = tl.sum(padded, 0)
    tl.store(total_out, total)
    tl.store(cursor + index, ends - padded)  # where each bucket's next pair goes
    for first in range(0, sorted_size, NP):  # every slot of the used runs: padding until a pair lands
        at = first + lane
        tl.store(sorted_ids + at, tl.zeros([NP], tl.int32) + numel, mask=at < total)
    for first in range(0, BLOCKS, CHUNK):
        block = first + tl.arange(0, CHUNK)
        begin = block * block_size
        owner = tl.sum((ends[None, :] <= begin[:, None]).to(tl.int32), axis=1)
        tl.store(expert_ids + block, owner - 1, mask=(begin < total) & (block < blocks_size))
    tl.debug_barrier()  # the cursors and the padding written before any pair takes its place
    place = tl.atomic_add(cursor + bucket, 1, mask=valid)
    tl.store(sorted_ids + place, lane, mask=valid)


def buckets_needed(buckets: int) -> int:
    """The histogram's width: a power of two with a spare bucket past the `buckets` used."""
    return triton.next_power_of_2(buckets + 1)


def align(topk_ids, buckets: int, block_size: int, sorted_ids, expert_ids, total, cursor) -> None:
    """SGLang's alignment of `topk_ids` ([rows, top_k] int32) into its buffers, `buckets` = experts
    + 1; `cursor`: int32 scratch of at least `buckets_needed(buckets)` entries."""
    numel = topk_ids.numel()
    width = buckets_needed(buckets)
    if cursor.numel() < width:
        raise ValueError(f"the align cursor holds {cursor.numel()} entries; {buckets} buckets need {width}")
    _align[(1,)](topk_ids, sorted_ids, expert_ids, total, cursor, numel, block_size, sorted_ids.numel(),
                 expert_ids.numel(), NP=triton.next_power_of_2(max(numel, 2)), BUCKETS=width,
                 BLOCKS=triton.next_power_of_2(max(expert_ids.numel(), CHUNK)), CHUNK=CHUNK, num_warps=8)
