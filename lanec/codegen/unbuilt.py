"""Facts of kernels not built yet: the wgmma GEMM in parts (the seed's `gemm_tc` facts; the
`gemm_tc` built today takes any parts, and its side-by-side gated pair is built: its facts are in
facts.py, `gated_pair_problems`). The conv with an L2 norm epilogue is built (`conv`: its facts are
facts.py's `conv_norm_problems`).

The held-back rules compare against these, so the fusions they keep are the ones these kernels
will launch. Until a kernel is built, the plan launches what the lowering gives the op today, and
every decision says which: a product in parts or a gated pair kept for the tensor cores runs on
`gemm_tc` above `GEMV_ROWS` rows (on the GEMV kernels below); an op no built kernel runs is named
by `lanec compile`. When a kernel is built, its facts move
beside it into `facts.py` (a spec whose `check()` its `__init__` calls too) and the rule calls
that, as the mixture's and the attentions' have.

Each `*_problems` function lists the facts a shape breaks, one phrase each (empty: it launches).
Plain Python, no CuTe DSL.
"""

from __future__ import annotations

from collections.abc import Sequence

# ----------------------------------------------------------------------------------------------
# gemm_tc: the wgmma GEMM for rows above a gemv launch's, products in parts and gated pairs

PART_TILE = 128  # a CTA's wgmma N tile: each part's outputs are tiled by 128, a tile never straddles parts
MAX_PARTS = 4  # parts a launch: the epilogue keeps one output pointer and pitch a part


def gemm_parts_problems(outputs: Sequence[int], formats: Sequence[str]) -> list[str]:
    """Why products in parts of these `outputs` rows and weight `formats` are not one tensor-core
    GEMM in parts."""
    found = []
    if len(outputs) > MAX_PARTS:
        found.append(f"{len(outputs)} parts are more than the tensor-core GEMM's {MAX_PARTS}")
    if len(set(formats)) > 1:
        found.append(f"the parts mix formats ({', '.join(sorted(set(formats)))})")
    ragged = [n for n in outputs if n % PART_TILE]
    if ragged:
        found.append(f"outputs {', '.join(map(str, ragged))} are not whole {PART_TILE}-output tiles")
    return found
