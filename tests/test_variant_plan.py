"""tests/gpu/variant_plan.py (a plan with some schedule-table entries replaced, for a step A/B on the GPU): the
replaced entry reaches the plan's launches, the table file is untouched, and an entry the table lacks is a
one-line refusal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lanec.codegen.schedules import TABLE
from lanec.runtime.plan import Plan

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tests" / "gpu" / "variant_plan.py"
FORM = ROOT / "examples" / "kimi-linear-small.mlir"
O_PROJ = "outputs=2304,rows=1,width=4096"  # the example's o_proj GEMVs (4 launches)


def o_proj_schedules(plan: Path) -> set[str]:
    return {launch.spec.get("schedule") and json.dumps(launch.spec["schedule"], sort_keys=True)
            for launch in Plan.read(plan).launches
            if launch.spec.get("width") == 4096 and tuple(launch.spec.get("parts", ())) == (2304,)}


def test_a_variant_plan_takes_the_replaced_entry(tmp_path):
    before = TABLE.read_text()
    wanted = {"warps": 8, "rows_per_cta": 4, "tensor_cores": False}
    done = subprocess.run([sys.executable, str(TOOL), str(FORM), str(tmp_path / "v.plan"), "gemv", O_PROJ,
                           json.dumps(wanted)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert o_proj_schedules(tmp_path / "v.plan") == {json.dumps(wanted, sort_keys=True)}
    assert TABLE.read_text() == before


def test_an_entry_the_table_lacks_is_refused_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(TOOL), str(FORM), str(tmp_path / "v.plan"), "gemv",
                           "outputs=7,rows=1,width=9", "{}"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1 and not (tmp_path / "v.plan").exists()
    assert done.stderr.strip() == "variant_plan: the table has no gemv entry 'outputs=7,rows=1,width=9' to replace"


def test_add_gives_a_shape_the_table_lacks_its_entry(tmp_path):
    wanted = {"warps": 8, "rows_per_cta": 4, "tensor_cores": False}
    table = json.loads(TABLE.read_text())
    del table["gemv"][O_PROJ]  # the same shape, as if the table had no entry for it
    lacking = tmp_path / "schedules.json"
    lacking.write_text(json.dumps(table))
    script = (f"import json, sys; from lanec.codegen import schedules; schedules.TABLE = __import__('pathlib').Path("
              f"{str(lacking)!r}); sys.argv = ['variant_plan'] + json.loads(sys.argv[1]); "
              f"exec(open({str(TOOL)!r}).read())")
    args = ["--add", str(FORM), str(tmp_path / "v.plan"), "gemv", O_PROJ, json.dumps(wanted)]
    done = subprocess.run([sys.executable, "-c", script, json.dumps(args)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert o_proj_schedules(tmp_path / "v.plan") == {json.dumps(wanted, sort_keys=True)}
