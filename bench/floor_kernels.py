"""The bench-only kernels of bench/launch_floor.py (CuTe DSL: imported on the CPU machine only, by its
`build` step): `Hop`, a launch that only hands a word on, and `Spread`, 576 CTAs that scale a row, with
the layer's norm as its last CTA's work where it has a `tail`."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Uint32
from launch_floor import EPS, WIDTH  # the chains' row (bench/ is on the path where this is imported)

from lanec.codegen.facts import VECTOR
from lanec.codegen.kernels.base import (
    LaunchShape,
    TensorParam,
    launch,
    release_dependents,
    release_dependents_at_entry,
)
from lanec.codegen.kernels.primitives import at, ticket
from lanec.codegen.kernels.rmsnorm import RmsNorm

SPREAD_VALUES = 4  # values a Spread CTA writes: 576 CTAs cover the row
SPREAD_THREADS = 288  # mixture_down's block, and a 2304-wide norm's 288 vectors of 8
NORM = RmsNorm(1, WIDTH, EPS)  # the tail's arithmetic (its weights and normalize), and the launch it replaces


class Hop:
    """A launch of `ctas` CTAs of `threads` that hands word c of `x` on to word c of `out` (+1), after
    its PDL wait; with `cluster` > 1 the CTAs launch in clusters of that many (and do nothing with
    them). Params: x, out [WIDTH] float32."""

    name = "hop"

    def __init__(self, ctas: int, pdl: bool = True, cluster: int = 1, threads: int = 256):
        self.ctas, self.pdl, self.cluster, self.threads = int(ctas), bool(pdl), int(cluster), int(threads)

    def params(self) -> list[TensorParam]:
        return [TensorParam("x", (WIDTH,), "float32"), TensorParam("out", (WIDTH,), "float32", written=True)]

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.ctas, 1, 1), block=(self.threads, 1, 1), cluster=(self.cluster, 1, 1),
                           pdl=self.pdl)

    @cute.jit
    def __call__(self, *, x: cute.Tensor, out: cute.Tensor):
        launch(self, x, out)

    @cute.kernel
    def kernel(self, x: cute.Tensor, out: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        cta, _, _ = cute.arch.block_idx()
        cute.arch.griddepcontrol_wait()
        release_dependents(self)
        if (thread == 0) & (cta < WIDTH):
            out[cta] = x[cta] + Float32(1.0)


class Spread:
    """576 CTAs, each scaling SPREAD_VALUES values of the row `x` into `out` after its PDL wait;
    with `tail`, the CTA that draws the grid's last ticket norms `out` into `y` (RmsNorm's
    arithmetic, with `w`). Params: x, w, out, (tickets [2] int32, y) — all [1, WIDTH] bf16 rows."""

    name = "spread"

    def __init__(self, tail: bool):
        self.tail = bool(tail)
        self.ctas = WIDTH // SPREAD_VALUES

    def params(self) -> list[TensorParam]:
        row = (1, WIDTH)
        params = [TensorParam("x", row, "bfloat16"), TensorParam("w", (WIDTH,), "bfloat16"),
                  TensorParam("out", row, "bfloat16", written=True)]
        if self.tail:
            params += [TensorParam("tickets", (2,), "int32", written=True),
                       TensorParam("y", row, "bfloat16", written=True)]
        return params

    def launch(self) -> LaunchShape:
        return LaunchShape(grid=(self.ctas, 1, 1), block=(SPREAD_THREADS, 1, 1), shared_bytes=64)

    @cute.jit
    def __call__(self, *, x: cute.Tensor, w: cute.Tensor, out: cute.Tensor, tickets: cute.Tensor = None,
                 y: cute.Tensor = None):
        launch(self, x, w, out, tickets, y)

    @cute.kernel
    def kernel(self, x: cute.Tensor, w: cute.Tensor, out: cute.Tensor, tickets: cute.Tensor, y: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        cta, _, _ = cute.arch.block_idx()
        scale = NORM.weights(w, thread) if cutlass.const_expr(self.tail) else None
        cute.arch.griddepcontrol_wait()
        if thread < SPREAD_VALUES:
            column = cta * SPREAD_VALUES + thread
            out[0, column] = (x[0, column].to(Float32) * Float32(1.5)).to(BFloat16)
        release_dependents(self)
        if cutlass.const_expr(self.tail):
            smem = cutlass.memory.SmemAllocator()
            last = smem.allocate_tensor(cutlass.Int32, cute.make_layout(4), 16)
            cute.arch.sync_threads()
            if thread == 0:
                drawn = ticket(at(tickets, 0), Uint32(self.ctas - 1))
                last[0] = cutlass.Int32(cutlass.select_(drawn == Uint32(self.ctas - 1), 1, 0))
            cute.arch.sync_threads()
            if last[0] == 1:
                cute.arch.fence_acq_rel_gpu()  # every CTA's values are seen
                values = cute.make_rmem_tensor((VECTOR, 1), Float32)
                loaded = cute.make_rmem_tensor(VECTOR, BFloat16)
                cute.autovec_copy(cute.zipped_divide(out, (1, VECTOR))[None, (0, thread)], loaded)
                h = loaded.load().to(Float32)
                values[None, 0].store(h)
                squares = (h * h).reduce(cute.ReductionOp.ADD, Float32(0.0), 0)
                NORM.normalize(values, squares, scale, y, 0, thread)


