"""Codegen: the lowering to the lane (lower.py, recording each kernel's specialization as spec.py
encodes it), the cute-dsl target (cute_dsl.py), the kernels and their registry (kernels/), their
ahead-of-time compile and cache (compile.py) and the plan writer."""

from __future__ import annotations

from collections.abc import Callable


def get_all_targets() -> dict[str, Callable[[], type]]:
    """Targets `lanec opt -t` knows beyond xDSL's own."""

    def get_cute_dsl() -> type:
        from lanec.codegen.cute_dsl import CuteDslTarget

        return CuteDslTarget

    return {"cute-dsl": get_cute_dsl}
