"""`python -m lanec.runtime plan.bin [--steps N] [--check] [--interpret] [--no-graph] [--no-pdl]
[--seed S] [--weights f.safetensors|f.gguf] [--repeats R] [--tp N] [--outputs f.npz]
[--serve N [--churn P] [--check-every K]]`: the runner on a
machine with nothing but numpy and cuda-python (and nccl4py for a plan for several ranks)."""

from __future__ import annotations

import sys

from lanec.runtime.runner import execute, parse, user_errors


def main(argv: list[str] | None = None) -> int:
    path, options = parse(sys.argv[1:] if argv is None else argv, "python -m lanec.runtime")
    try:
        return execute(path, options)
    except user_errors() as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
