"""`embed`: out[r] = table[tokens[r]], bf16 rows of ``width`` values, copied as 16-byte vectors.
A token outside the vocabulary gives a zero row (the interpreter rejects it; the kernel must not
read out of bounds)."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16

from lanec.codegen.facts import VECTOR, EmbedSpec
from lanec.codegen.kernels.base import LaunchShape, TensorParam, launch, release_dependents, release_dependents_at_entry

MAX_THREADS = 256


class Embed:
    """Params: tokens [rows] int32, table [vocab, width] bf16, out [rows, width] bf16."""

    name = "embed"

    def __init__(self, rows: int, vocab: int, width: int):
        EmbedSpec(rows, vocab, width).check()
        self.rows, self.vocab, self.width = rows, vocab, width
        self.threads = min(MAX_THREADS, 32 * -(-(width // VECTOR) // 32))

    def params(self) -> list[TensorParam]:
        return [TensorParam("tokens", (self.rows,), "int32"),
                TensorParam("table", (self.vocab, self.width), "bfloat16"),
                TensorParam("out", (self.rows, self.width), "bfloat16", written=True)]

    def touched(self) -> dict[str, int]:
        return {"table": self.rows}  # a row of the table a token

    def launch(self) -> LaunchShape:
        chunks = -(-(self.width // VECTOR) // self.threads)
        return LaunchShape(grid=(chunks, self.rows, 1), block=(self.threads, 1, 1))

    @cute.jit
    def __call__(self, *, tokens: cute.Tensor, table: cute.Tensor, out: cute.Tensor):
        launch(self, tokens, table, out)

    @cute.kernel
    def kernel(self, tokens: cute.Tensor, table: cute.Tensor, out: cute.Tensor):
        release_dependents_at_entry(self)
        thread, _, _ = cute.arch.thread_idx()
        chunk, row, _ = cute.arch.block_idx()
        vector = chunk * self.threads + thread
        vectors: cutlass.Constexpr = self.width // VECTOR
        cute.arch.griddepcontrol_wait()  # the tokens are a predecessor's output (sampling)
        token = tokens[row]
        values = cute.make_rmem_tensor(VECTOR, BFloat16)
        values.fill(0)
        if vector < vectors:
            table_vector(table, token, vector, self.vocab, values)
        release_dependents(self)
        if vector < vectors:
            cute.autovec_copy(values, cute.zipped_divide(out, (1, VECTOR))[None, (row, vector)])


@cute.jit
def table_vector(table: cute.Tensor, token, vector, vocab: int, values):
    """Vector `vector` of `table` row `token` into `values` (bf16 registers), which a token outside the
    table's `vocab` rows leaves as they are (zeros where the caller filled them): embed's read, and
    rmsnorm's where it gathers the embed's rows."""
    if (token >= 0) & (token < vocab):
        cute.autovec_copy(cute.zipped_divide(table, (1, VECTOR))[None, (token, vector)], values)
