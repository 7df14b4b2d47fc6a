"""One way for a GPU test to import a sibling file by path (a case module, another test's helpers):
tests/gpu is no package, and a case module must stay importable without CuTe DSL."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
