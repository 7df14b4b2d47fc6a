"""The runtime stands on its own: on a machine where xDSL, CuTe DSL and click cannot be imported
(the GPU machine), `import lanec.runtime` works, a plan the compiler wrote loads and validates,
and `python -m lanec.runtime plan --interpret` runs it to the end. The compiler's own packages
(lanec.codegen, the dialects, the passes, the pipeline, the commands) are refused as well, so a
runtime module that imports them again fails here even when they import nothing heavy."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from forms import DENSE as FORM

from lanec.cli import main
from lanec.runtime.plan import Plan

# Installed before lanec is imported: every module the runtime must not need raises ImportError.
BLOCKER = textwrap.dedent('''
    import sys

    FOREIGN = {"xdsl", "cutlass", "click"}
    # the lanec modules the runtime may import: itself, and the interpreter's numpy half
    ALLOWED = {"lanec", "lanec.interp", "lanec.interp.ops", "lanec.interp.program", "lanec.interp.environment",
               "lanec.interp.lazy"}


    def refused(name):
        if name.split(".")[0] in FOREIGN:
            return True
        return name.startswith("lanec.") and name not in ALLOWED and not name.startswith("lanec.runtime")


    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if refused(name):
                raise ImportError(f"{name} is not available on the runtime's machine")
            return None


    sys.meta_path.insert(0, Refuse())
''')

LOAD = BLOCKER + textwrap.dedent('''
    for name in ("xdsl", "cutlass", "click", "lanec.codegen.kernels.base"):
        try:
            __import__(name)
        except ImportError:
            print(f"refused {name}")
        else:
            raise SystemExit(f"{name} imported: the refusal does not work")

    import lanec.runtime
    from lanec.runtime import artifact, driver, dtypes, launch, runner, tolerance, weights
    from lanec.runtime.plan import Plan, describe

    plan = Plan.read(sys.argv[1])
    plan.validate()
    for item in plan.launches:
        item.shape.check()
    print(describe(plan).splitlines()[0])
    print(f"validated {len(plan.launches)} launches, {len(plan.buffers)} buffers, {len(plan.weights)} weights")
    leaked = sorted(name for name in sys.modules if refused(name))
    print(f"leaked: {leaked}")
''')

RUN = BLOCKER + textwrap.dedent('''
    import runpy

    sys.argv = ["python -m lanec.runtime", *sys.argv[1:]]
    runpy.run_module("lanec.runtime", run_name="__main__", alter_sys=True)
''')


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("standalone")
    (folder / "small.mlir").write_text(FORM)
    result = CliRunner().invoke(main, ["compile", str(folder / "small.mlir"), "-o", str(folder / "small.plan")])
    assert result.exit_code == 0, result.output
    return folder / "small.plan"


def python(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=False,
                          timeout=300)


def test_the_runtime_loads_and_validates_a_plan_without_the_compiler(plan_path):
    done = python(LOAD, str(plan_path))
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("xdsl", "cutlass", "click", "lanec.codegen.kernels.base"):
        assert f"refused {name}" in done.stdout
    plan = Plan.read(plan_path)  # what the compiler's side reads
    assert plan.launches and "lanec plan, format 1:" in done.stdout
    assert (f"validated {len(plan.launches)} launches, {len(plan.buffers)} buffers, {len(plan.weights)} weights"
            in done.stdout), done.stdout
    assert "leaked: []" in done.stdout


def test_python_m_runtime_interprets_a_plan_without_the_compiler(plan_path):
    done = python(RUN, str(plan_path), "--interpret", "--steps", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "output 1: float32 [3, 64]" in done.stdout, done.stdout
    assert "interpreted 2 steps on the CPU" in done.stdout, done.stdout


def test_a_refused_import_is_what_fails_when_the_runtime_needs_the_compiler():
    """The refusal itself: a module that imports the compiler cannot be loaded under it."""
    done = python(BLOCKER + "import lanec.codegen.plan_writer\n")
    assert done.returncode != 0 and "is not available on the runtime's machine" in done.stderr
