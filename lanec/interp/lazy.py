"""A weight the interpreter holds as a view, made a few rows (first-axis entries) at a time: a
real-size check computes only what the step reads. The mixture takes its chosen experts' rows and
embed its tokens' rows (`ops.mixture`, `ops.embed` index the first axis); any other op reads the
whole weight through `np.asarray` (the products: the dense part of a step).

    table = LazyWeight.seeded("model.embed_tokens.weight", (163840, 2304), seed=0, scale=1.0)
    table[[5, 17]]        # two rows, generated from `lanec.runtime.seeded`
    table.generated       # 2
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np

from lanec.runtime import dtypes, seeded


class LazyWeight:
    """A weight of `shape` whose rows [first, first + count) `make(first, count)` gives as float32
    values; `generated` counts the rows made so far (the whole weight counts all of its rows)."""

    def __init__(self, shape: tuple[int, ...], make: Callable[[int, int], np.ndarray], dtype: str = "float32"):
        if not shape:
            raise ValueError("a lazy weight needs a first axis to index")
        self.shape, self.dtype, self._make = tuple(shape), dtypes.canonical(dtype), make
        self.generated = 0
        self._counting = threading.Lock()  # rows may be made on several threads (ops.mixture)

    @classmethod
    def seeded(cls, name: str, shape: tuple[int, ...], seed: int, scale: float, center: float = 0.0,
               dtype: str = "float32") -> LazyWeight:
        """The seeded weight `name` (`lanec.runtime.seeded`), rounded to `dtype` as the runtime's."""
        return cls(shape, lambda first, count: seeded.rows(name, seed, shape, first, count, scale, center, dtype),
                   dtype)

    def map(self, rowwise: Callable[[np.ndarray], np.ndarray]) -> LazyWeight:
        """This weight with `rowwise` applied to whatever rows are made (a function of each row
        alone, as q8_0's blocks along the last axis are); rows made count here."""

        def make(first: int, count: int) -> np.ndarray:
            return rowwise(self.rows(first, count))

        return LazyWeight(self.shape, make, self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def rows(self, first: int, count: int) -> np.ndarray:
        """Rows [first, first + count) as float32 [count, *shape[1:]]."""
        if not 0 <= first <= first + count <= self.shape[0]:
            raise IndexError(f"rows [{first}, {first + count}) of a weight of {self.shape[0]}")
        with self._counting:
            self.generated += count
        return np.asarray(self._make(first, count), dtype=np.float32).reshape(count, *self.shape[1:])

    def __getitem__(self, index) -> np.ndarray:
        """Indexing the first axis (an int, a slice, or an array of ints; each distinct row made
        once), then the rest as numpy indexes the rows."""
        first, rest = (index[0], index[1:]) if isinstance(index, tuple) else (index, ())
        length = self.shape[0]
        if isinstance(first, slice):
            start, stop, stride = first.indices(length)
            wanted = None if stride == 1 else np.arange(start, stop, stride)
            taken, lead = (self.rows(start, max(stop - start, 0)), 1) if wanted is None else (self[wanted], 1)
        elif isinstance(first, int | np.integer):
            if not -length <= first < length:
                raise IndexError(f"index {first} of a weight of {length} rows")
            taken, lead = self.rows(int(first) % length, 1)[0], 0
        else:
            wanted = np.asarray(first, dtype=np.int64)
            if ((wanted < -length) | (wanted >= length)).any():
                raise IndexError(f"indices outside a weight of {length} rows")
            distinct, where = np.unique(wanted % length, return_inverse=True)
            made = np.empty((distinct.size, *self.shape[1:]), np.float32)
            for i, row in enumerate(distinct):
                made[i] = self.rows(int(row), 1)[0]
            taken, lead = made[where.reshape(wanted.shape)], wanted.ndim
        return taken[(slice(None),) * lead + rest] if rest else taken

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self.rows(0, self.shape[0])
        return whole if dtype is None else whole.astype(dtype)
