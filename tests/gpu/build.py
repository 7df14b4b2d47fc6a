"""Compile every kernel case of tests/gpu/cases/ for sm_90a into build/gpu/<kernel>/<case>.cubin
+ .json, and write build/gpu/manifest.json (each case's kernel, stem and specialization). Run on
the CPU machine, then carry build/ to the GPU machine:

    python tests/gpu/build.py [--cache-dir DIR] [--only KERNEL ...]

Without --only it also builds KdaSplit's cases (tests/gpu/cases/kda_split.py), the driver tests'
kernel (tests/gpu/test_driver.py --build), the whole plans of tests/gpu/plans.py, each family's
tiny model for `lanec generate` (tests/gpu/tiny_models.py: needs the `ref` extra) and the GGUF
model with its plans (tests/gpu/gguf_model.py), so that `python3 -m pytest tests/gpu` there runs
everything.

A case module names its kernel (`KERNEL`), its specializations (`CASES`: case name -> JSON
constructor arguments) and `make(spec)`, which builds the kernel object (importing CuTe DSL only
there, so the GPU tests can import the module for `CASES`). Modules without them (a kernel with
its own builder, like kda_split.py) are skipped."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = Path(__file__).resolve().parent / "cases"
OUT = ROOT / "build" / "gpu"
MANIFEST = OUT / "manifest.json"


def case_modules() -> dict:
    """{kernel name: module} for every case module that follows the KERNEL / CASES / make form."""
    modules = {}
    for path in sorted(CASES_DIR.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"lanec_gpu_cases_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if all(hasattr(module, name) for name in ("KERNEL", "CASES", "make")):
            modules[module.KERNEL] = module
    return modules


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", default=None, help="compile cache (default: ~/.cache/lanec)")
    parser.add_argument("--only", nargs="*", default=None, help="kernels to build (default: all)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel

    entries = json.loads(MANIFEST.read_text())["cases"] if MANIFEST.is_file() else []
    modules = case_modules()
    chosen = set(args.only) if args.only else set(modules)
    unknown = chosen - set(modules)
    if unknown:
        parser.error(f"no case module for {sorted(unknown)}; have {sorted(modules)}")
    entries = [e for e in entries if e["kernel"] not in chosen]
    for kernel_name in sorted(chosen):
        module = modules[kernel_name]
        for case, spec in module.CASES.items():
            start = time.perf_counter()
            compiled = compile_kernel(module.make(spec), cache_dir=args.cache_dir)
            stem = f"{kernel_name}/{case}"
            compiled.save(OUT / kernel_name, case)
            entries.append({"kernel": kernel_name, "case": case, "stem": stem, "spec": spec})
            origin = "cached" if compiled.from_cache else f"{time.perf_counter() - start:.1f} s"
            print(f"{stem:45s} grid {compiled.launch.grid} block {compiled.launch.block[0]:4d}  {origin}")
    OUT.mkdir(parents=True, exist_ok=True)
    MANIFEST.write_text(json.dumps({"cases": entries}, indent=1) + "\n")
    print(f"{len(entries)} cases in {MANIFEST.relative_to(ROOT)}")
    if args.only is None:  # everything tests/gpu runs: KdaSplit's cases and the whole plans too
        # its own process: the KdaSplit builder compiles in a process pool of its own
        subprocess.run([sys.executable, str(CASES_DIR / "kda_split.py"), "--set", "quick", "--set", "cluster1",
                        "--set", "tuned"], check=True)
        # the driver tests' own kernel (clusters, PDL, large shared memory)
        subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "test_driver.py"), "--build"],
                       check=True)
        for path in load_script("gpu_plans", Path(__file__).resolve().parent / "plans.py").build():
            print(f"plan {path.relative_to(ROOT)}")
        # each family's tiny transformers model and its plan, for `lanec generate` (torch, transformers)
        for path in load_script("gpu_tiny_models", Path(__file__).resolve().parent / "tiny_models.py").build():
            print(f"plan {path.relative_to(ROOT)}")
        # a GGUF file of a tiny Llama-style model and its plans, for `lanec run --weights model.gguf --check`
        for path in load_script("gpu_gguf_model", Path(__file__).resolve().parent / "gguf_model.py").build():
            print(f"plan {path.relative_to(ROOT)}")
    return 0


def load_script(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(f"lanec_gpu_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main())
