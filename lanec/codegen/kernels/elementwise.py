"""`elementwise`: add, mul, silu, sigmoid and swiglu (silu(g) * u) over [rows, width] bf16
tensors, fp32 arithmetic, bf16 out. The tensors are read as one flat run of 16-byte vectors, a
few per thread, every load issued before the first is used."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32

from lanec.codegen.facts import ELEMENTWISE_OPERANDS as OPERANDS
from lanec.codegen.facts import SM_COUNT, VECTOR, ElementwiseSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch
from lanec.codegen.kernels.primitives import sigmoid

THREADS = 256
# Vectors a thread handles once the grid would cover every SM anyway (more loads in flight).
VECTORS_PER_THREAD = 4


class Elementwise:
    """out = op(a[, b]) over [rows, width]; ``op`` one of add, mul, silu, sigmoid, swiglu (a is
    the gate, b the up). Params: a, (b), out."""

    name = "elementwise"

    def __init__(self, op: str, rows: int, width: int):
        ElementwiseSpec(op, rows, width).check()
        self.op, self.rows, self.width = op, rows, width
        self.vectors = rows * width // VECTOR
        # small tensors spread over many CTAs (latency); large ones give each thread a few vectors
        wide = self.vectors >= VECTORS_PER_THREAD * THREADS * SM_COUNT
        self.per_thread = VECTORS_PER_THREAD if wide else 1

    def params(self) -> list[TensorParam]:
        shape = (self.rows, self.width)
        inputs = [TensorParam(name, shape, "bfloat16") for name in ("a", "b")[: OPERANDS[self.op]]]
        return [*inputs, TensorParam("out", shape, "bfloat16", written=True)]

    def launch(self) -> LaunchShape:
        blocks = -(-self.vectors // (THREADS * self.per_thread))
        return LaunchShape(grid=(blocks, 1, 1), block=(THREADS, 1, 1))

    @cute.jit
    def __call__(self, *, a: cute.Tensor, b: cute.Tensor = None, out: cute.Tensor):
        launch(self, a, b, out)

    @cute.jit
    def flat(self, tensor):
        """The tensor as [8, vectors]: one column a 16-byte vector."""
        run = cute.make_tensor(tensor.iterator, cute.make_layout(self.rows * self.width))
        return cute.zipped_divide(run, (VECTOR,))

    @cute.jit
    def apply(self, a, b):
        if cutlass.const_expr(self.op == "add"):
            return a + b
        if cutlass.const_expr(self.op == "mul"):
            return a * b
        gate = a.to(Float32)
        activated = cute.make_rmem_tensor(VECTOR, Float32)
        for e in cutlass.range_constexpr(VECTOR):
            value = gate[e]
            if cutlass.const_expr(self.op == "sigmoid"):
                activated[e] = sigmoid(value)
            else:
                activated[e] = value * sigmoid(value)
        if cutlass.const_expr(self.op == "swiglu"):
            return activated.load() * b
        return activated.load()

    @cute.kernel
    def kernel(self, a: cute.Tensor, b: cute.Tensor, out: cute.Tensor):
        thread, _, _ = cute.arch.thread_idx()
        block, _, _ = cute.arch.block_idx()
        count: cutlass.Constexpr = OPERANDS[self.op]
        inputs = [self.flat(t) for t in (a, b)[:count]]
        out = self.flat(out)
        first = block * (THREADS * self.per_thread) + thread
        cute.arch.griddepcontrol_wait()  # every operand is a predecessor's output
        loaded = cute.make_rmem_tensor((VECTOR, count * self.per_thread), BFloat16)
        loaded.fill(0)
        for i in cutlass.range_constexpr(self.per_thread):
            vector = first + i * THREADS
            if vector < self.vectors:
                for j in cutlass.range_constexpr(count):
                    cute.autovec_copy(inputs[j][None, vector], loaded[None, i * count + j])
        cute.arch.griddepcontrol_launch_dependents()
        for i in cutlass.range_constexpr(self.per_thread):
            vector = first + i * THREADS
            if vector < self.vectors:
                first_values = loaded[None, i * count].load().to(Float32)
                second_values = first_values
                if cutlass.const_expr(count == 2):
                    second_values = loaded[None, i * count + 1].load().to(Float32)
                result = cute.make_rmem_tensor(VECTOR, BFloat16)
                result.store(self.apply(first_values, second_values).to(BFloat16))
                cute.autovec_copy(result, out[None, vector])
