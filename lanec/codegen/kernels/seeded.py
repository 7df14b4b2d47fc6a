"""`seeded`: out[i] = the seeded value of index i of a weight's stream, as `lanec.runtime.seeded`
defines it (bit for bit): z = splitmix64's finalizer of key + i * GOLDEN, n = (z >> 40) - 2^23,
value = center + fp32(n) * step, rounded to bf16 (to nearest even) for a bf16 buffer. The key is
the stream's key already moved to the buffer's first index (`seeded.offset_key`), so one
specialization (a count and a dtype) fills that many values of any weight, from any index."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Uint32, Uint64

from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch
from lanec.codegen.kernels.primitives import rounded
from lanec.runtime.dtypes import cute_type
from lanec.runtime.seeded import CENTRE, GOLDEN, M1, M2

THREADS = 256
VALUES = 8  # values a thread makes: value v of a CTA's block is index (block * VALUES + v) * THREADS + thread
MAX_COUNT = 1 << 30  # indices stay 32-bit (a larger weight is filled in parts, each with its offset key)


class Seeded:
    """Params: key [2] int32 (the 64-bit key of index 0: low word, high word), affine [2] float32
    (step, center: `seeded.step(scale)` and the center), out [count] bfloat16 or float32."""

    name = "seeded"

    def __init__(self, count: int, dtype: str = "bfloat16"):
        if not 1 <= count <= MAX_COUNT:
            raise ValueError(f"seeded: {count} values; 1 to {MAX_COUNT} a launch (indices are 32-bit: fill a "
                             "larger weight in parts, each with its offset key)")
        if dtype not in ("bfloat16", "float32"):
            raise ValueError(f"seeded: dtype {dtype!r}: bfloat16 or float32")
        self.count, self.dtype = count, dtype

    def params(self) -> list[TensorParam]:
        return [TensorParam("key", (2,), "int32"), TensorParam("affine", (2,), "float32"),
                TensorParam("out", (self.count,), self.dtype, written=True)]

    def launch(self) -> LaunchShape:
        # no PDL: nothing before it writes what it reads, and weights are made once, before any step
        return LaunchShape(grid=(-(-self.count // (THREADS * VALUES)), 1, 1), block=(THREADS, 1, 1), pdl=False)

    @cute.jit
    def __call__(self, *, key: cute.Tensor, affine: cute.Tensor, out: cute.Tensor):
        launch(self, key, affine, out)

    @cute.kernel
    def kernel(self, key: cute.Tensor, affine: cute.Tensor, out: cute.Tensor):
        thread, _, _ = cute.arch.thread_idx()
        block, _, _ = cute.arch.block_idx()
        # through Uint32: an Int32 word would sign-extend into the high half
        stream = Uint64(Uint32(key[0])) | (Uint64(Uint32(key[1])) << Uint64(32))
        step, center = affine[0], affine[1]
        for v in cutlass.range_constexpr(VALUES):
            index = (block * VALUES + v) * THREADS + thread  # a warp's stores are consecutive
            if index < self.count:
                z = stream + Uint64(Uint32(index)) * Uint64(GOLDEN)
                z = (z ^ (z >> Uint64(30))) * Uint64(M1)
                z = (z ^ (z >> Uint64(27))) * Uint64(M2)
                z = z ^ (z >> Uint64(31))
                centred = Int32(Uint32(z >> Uint64(40))) - Int32(CENTRE)  # the top 24 bits: no sign to lose
                value = rounded("add", rounded("mul", Float32(centred), step), center)  # the host's op order
                out[index] = value.to(cute_type(self.dtype))
