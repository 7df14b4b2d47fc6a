"""Seeded weights: every value a pure function of (seed, the weight's name, its flat index), so the
host and the GPU (`lanec/codegen/kernels/seeded.py`) give any element identically, in any order,
without the rest of the weight.

    key(name, seed) = mix(fnv1a64(utf-8 name) + seed * GOLDEN)                  (mod 2^64)
    z               = mix(key + index * GOLDEN)                                 (splitmix64)
    n               = (z >> 40) - 2^23      the top 24 bits, centred: an int in [-2^23, 2^23)
    value           = center + step * n     step = fp32(scale * sqrt(3)) * 2^-23, in fp32:
                      p = fp32(n) * step, one rounding; value = center + p, one rounding

then rounded to the weight's dtype (`dtypes.representable`: bf16 to nearest even). n / 2^23 is
2u - 1 for the uniform u = top24 / 2^24, so a value is `center + scale * sqrt(3) * (2u - 1)`:
uniform on center +- sqrt(3) scale, of standard deviation `scale`. Bit-reproducible: the integer
steps are exact; fp32(n) is exact (24 bits); `step` is made once on the host and handed to the
GPU as fp32 (a power-of-two scaling of an fp32 is exact); the product and the sum are each one
IEEE round-to-nearest-even, which numpy's float32 ufuncs do and the kernel asks for by PTX's
`mul.rn.f32` / `add.rn.f32` (an explicit rounding is never fused into an FMA); no transcendental.

`mix` is splitmix64's finalizer: z ^= z >> 30; z *= M1; z ^= z >> 27; z *= M2; z ^= z >> 31.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from lanec.runtime import dtypes

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's increment: 2^64 / the golden ratio, odd
M1, M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # splitmix64's finalizer multipliers
FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
CENTRE = 1 << 23  # n = top 24 bits - 2^23
CHUNK = 1 << 18  # values generated at once: each of _fill's passes stays in the core's L2 (2.5x the
#                  speed of 4M-value chunks), and the host's working memory is a few chunks
THREADED = 1 << 22  # values from which a range is generated on several threads


def fnv1a64(text: str) -> int:
    """FNV-1a, 64 bits, of the UTF-8 bytes of `text`."""
    h = FNV_OFFSET
    for byte in text.encode():
        h = ((h ^ byte) * FNV_PRIME) & MASK
    return h


def mix(z: int) -> int:
    """splitmix64's finalizer of a 64-bit integer."""
    z = ((z ^ (z >> 30)) * M1) & MASK
    z = ((z ^ (z >> 27)) * M2) & MASK
    return z ^ (z >> 31)


def key(name: str, seed: int) -> int:
    """The 64-bit key of weight `name`'s stream under `seed`."""
    return mix((fnv1a64(name) + (seed & MASK) * GOLDEN) & MASK)


def offset_key(name: str, seed: int, start: int) -> int:
    """The key whose index 0 is `name`'s index `start`: what a kernel filling part of a weight gets
    (key + index * GOLDEN is linear in the index)."""
    return (key(name, seed) + start * GOLDEN) & MASK


def step(scale: float) -> np.float32:
    """fp32(scale * sqrt(3)) * 2^-23: what multiplies the centred 24 bits (exactly scaled)."""
    return np.float32(np.float32(scale * math.sqrt(3.0)) * np.float32(2.0 ** -23))


def _fill(out: np.ndarray, stream_key: int, first: int, multiplier: np.float32, center: np.float32) -> None:
    """out[i] = the fp32 value of index first + i (before the dtype's rounding)."""
    z = np.arange(first, first + out.size, dtype=np.uint64)
    z *= np.uint64(GOLDEN)
    z += np.uint64(stream_key)
    z ^= z >> np.uint64(30)
    z *= np.uint64(M1)
    z ^= z >> np.uint64(27)
    z *= np.uint64(M2)
    z ^= z >> np.uint64(31)
    z >>= np.uint64(40)
    centred = z.view(np.int64)
    centred -= CENTRE
    np.multiply(centred.astype(np.float32), multiplier, out=out)  # the int to fp32 is exact: 24 bits
    out += center


def values(name: str, seed: int, start: int, count: int, scale: float, center: float,
           dtype: str = "float32", threads: int | None = None) -> np.ndarray:
    """float32 values of indices [start, start + count) of weight `name`, rounded to `dtype`,
    generated CHUNK at a time (on up to `threads` threads: numpy's ufuncs release the GIL on whole
    arrays); the same values however the range is cut."""
    if start < 0 or count < 0:
        raise ValueError(f"seeded values [{start}, {start + count}): a range of non-negative indices")
    out = np.empty(count, np.float32)
    stream_key, multiplier, centre = key(name, seed), step(scale), np.float32(center)

    def fill(chunk: int) -> None:
        part = out[chunk * CHUNK:(chunk + 1) * CHUNK]
        _fill(part, stream_key, start + chunk * CHUNK, multiplier, centre)
        part[...] = dtypes.representable(part, dtype)

    chunks = range(-(-count // CHUNK))
    if len(chunks) <= 1 or count < THREADED:  # small ranges: often one of many on threads already
        list(map(fill, chunks))
    else:
        with ThreadPoolExecutor(max(1, min(len(chunks), threads or os.cpu_count() or 1, 16))) as pool:
            list(pool.map(fill, chunks))
    return out


def rows(name: str, seed: int, shape: tuple[int, ...], first: int, count: int, scale: float, center: float,
         dtype: str = "float32") -> np.ndarray:
    """Rows [first, first + count) of the first axis of weight `name` of `shape` (row-major), as
    [count, *shape[1:]] float32 values rounded to `dtype`."""
    if not shape or not 0 <= first <= first + count <= shape[0]:
        raise ValueError(f"seeded rows [{first}, {first + count}) of a weight of shape {list(shape)}")
    width = math.prod(shape[1:])
    return values(name, seed, first * width, count * width, scale, center, dtype).reshape(count, *shape[1:])


def kernel_params(name: str, seed: int, start: int, scale: float, center: float) -> dict[str, np.ndarray]:
    """The `seeded` kernel's run-time inputs to fill indices [start, start + its count) of weight
    `name`: key (the offset key's low and high 32-bit words, as int32) and affine (step, center)."""
    words = np.array([offset_key(name, seed, start)], np.uint64).view(np.int32)  # little-endian: low first
    return {"key": words.copy(), "affine": np.array([step(scale), center], np.float32)}
