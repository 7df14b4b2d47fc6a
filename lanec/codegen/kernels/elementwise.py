"""`elementwise`: add, mul, silu, sigmoid and swiglu (silu(g) * u) over [rows, width] bf16
tensors, fp32 arithmetic, bf16 out. The tensors are read as one flat run of 16-byte vectors, a
few per thread, every load issued before the first is used.

With `quantize` (1 or 2 words: fuse-quant put the quantize in the op's epilogue) out is written in
the quantized form a product by q8_0 rows reads (lanec/codegen/kernels/quantize.py's layout), from
the op's fp32 values as ops.quantize computes it: a 32-value block is four consecutive threads'
vectors (rows are whole blocks, so no block straddles two), their peak met by shuffles."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32

from lanec.codegen.facts import ELEMENTWISE_OPERANDS as OPERANDS
from lanec.codegen.facts import SM_COUNT, VECTOR, ElementwiseSpec, quantized_pitch
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry
from lanec.codegen.kernels.primitives import float_bits, sigmoid, store_global_words
from lanec.codegen.kernels.quantize import LANES_A_BLOCK, quantized_lane, scale_at, store_quantized

THREADS = 256
# Vectors a thread handles once the grid would cover every SM anyway (more loads in flight).
VECTORS_PER_THREAD = 4


class Elementwise:
    """out = op(a[, b]) over [rows, width]; ``op`` one of add, mul, silu, sigmoid, swiglu (a is
    the gate, b the up); ``quantize``: out in the quantized form of that many int8 words a value.
    Params: a, (b), out (bf16, or int8 rows of the quantized form)."""

    name = "elementwise"

    def __init__(self, op: str, rows: int, width: int, quantize: int = 0):
        ElementwiseSpec(op, rows, width, quantize).check()
        self.op, self.rows, self.width, self.quantize = op, rows, width, int(quantize)
        self.vectors = rows * width // VECTOR
        # small tensors spread over many CTAs (latency); large ones give each thread a few vectors
        wide = self.vectors >= VECTORS_PER_THREAD * THREADS * SM_COUNT
        self.per_thread = VECTORS_PER_THREAD if wide else 1

    def params(self) -> list[TensorParam]:
        shape = (self.rows, self.width)
        inputs = [TensorParam(name, shape, "bfloat16") for name in ("a", "b")[: OPERANDS[self.op]]]
        if self.quantize:
            quantized = (self.rows, quantized_pitch(self.width, self.quantize))
            return [*inputs, TensorParam("out", quantized, "int8", written=True)]
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
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        block, _, _ = cute.arch.block_idx()
        count: cutlass.Constexpr = OPERANDS[self.op]
        inputs = [self.flat(t) for t in (a, b)[:count]]
        flat_out = out if cutlass.const_expr(self.quantize) else self.flat(out)
        first = block * (THREADS * self.per_thread) + thread
        cute.arch.griddepcontrol_wait()  # every operand is a predecessor's output
        loaded = cute.make_rmem_tensor((VECTOR, count * self.per_thread), BFloat16)
        loaded.fill(0)
        for i in cutlass.range_constexpr(self.per_thread):
            vector = first + i * THREADS
            if vector < self.vectors:
                for j in cutlass.range_constexpr(count):
                    cute.autovec_copy(inputs[j][None, vector], loaded[None, i * count + j])
        release_dependents(self)
        for i in cutlass.range_constexpr(self.per_thread):
            vector = first + i * THREADS
            if cutlass.const_expr(self.quantize):
                # every lane takes its block's shuffles (past the tensor: whole blocks of zeros' results)
                values = cute.make_rmem_tensor(VECTOR, Float32)
                values.store(self.apply(*self.operands(loaded, i, count)))
                words, block_scale = quantized_lane([values[e] for e in range(VECTOR)], self.quantize)
                if vector < self.vectors:
                    units = self.width // VECTOR
                    row, unit = vector // units, vector % units
                    store_quantized(flat_out, row, unit, self.width, words)
                    if thread % LANES_A_BLOCK == 0:
                        store_global_words(scale_at(flat_out, row, unit, self.width, self.quantize),
                                           float_bits(block_scale))
            elif vector < self.vectors:
                result = cute.make_rmem_tensor(VECTOR, BFloat16)
                result.store(self.apply(*self.operands(loaded, i, count)).to(BFloat16))
                cute.autovec_copy(result, flat_out[None, vector])

    @cute.jit
    def operands(self, loaded, i, count):
        """Vector i's operands as fp32 (the one operand twice for a unary op)."""
        first_values = loaded[None, i * count].load().to(Float32)
        second_values = first_values
        if cutlass.const_expr(count == 2):
            second_values = loaded[None, i * count + 1].load().to(Float32)
        return first_values, second_values
