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
    # naming `preload` keeps the entry's own schedule on the o_proj after KdaSplit too (GEMV_PRELOAD_AFTER)
    wanted = {"warps": 8, "rows_per_cta": 4, "tensor_cores": False, "preload": False}
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


def test_add_gives_a_shape_the_table_lacks_its_entry(tmp_path, monkeypatch):
    import importlib.util

    from lanec.codegen import schedules

    # naming `preload` keeps the entry's own schedule on the o_proj after KdaSplit too (GEMV_PRELOAD_AFTER)
    wanted = {"warps": 8, "rows_per_cta": 4, "tensor_cores": False, "preload": False}
    held = schedules.table()
    lacking = {**held, "gemv": {k: v for k, v in held["gemv"].items() if k != O_PROJ}}  # as if it had no entry
    monkeypatch.setattr(schedules, "table", lambda: lacking)
    spec = importlib.util.spec_from_file_location("variant_plan", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.main(["--add", str(FORM), str(tmp_path / "v.plan"), "gemv", O_PROJ, json.dumps(wanted)])
    assert o_proj_schedules(tmp_path / "v.plan") == {json.dumps(wanted, sort_keys=True)}
