"""The reference interpreter (the oracle): every `form` op's exact meaning in numpy, fp32.

    ops.py          one function an op (numpy only)
    program.py      a step as plain, JSON-serialisable data that runs on numpy alone
    environment.py  inputs, weights and states; fresh random ones for a program
    lower.py        a `form` module as a Program (imports xDSL)

This package imports nothing heavy at module level: the GPU machine runs programs without xDSL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from xdsl.dialects.builtin import ModuleOp

    from lanec.interp.environment import Environment


def interpret(module: ModuleOp, env: Environment) -> list[np.ndarray]:
    """Run a module holding one form.step on `env` (its states updated in place)."""
    from lanec.interp.lower import program_of

    return program_of(module).run(env)
