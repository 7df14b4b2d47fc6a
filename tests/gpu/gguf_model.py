"""The tiny Llama-style model of tests/gguf_llama.py as a GGUF file written by the gguf package, and
its plans, for tests/gpu/test_gguf_run.py (`lanec run plan --weights model.gguf --check` on the GPU).
Built here, where the plans compile (CuTe DSL), into build/gguf/:

    python tests/gpu/gguf_model.py

- model.gguf: every projection and the lm head Q8_0 (llama.cpp's blocks), the embed table and the
  norms F32, under llama.cpp's names with its q / k permutation;
- llama-gguf-q8.plan: the form with Q8_0 checkpoint rows (the products' `format` "q8_0"), compiled
  under quantized numerics, one word: a quantize launch before each q8_gemv / q8_gated_gemv;
- llama-gguf-q8-fused.plan: the same with two words and `--fuse-quant` (the norms quantize in their
  epilogue);
- llama-gguf-bf16.plan: the bf16 form, its Q8_0 tensors bound as their values."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "build" / "gguf"
GGUF = OUT / "model.gguf"
# plan name -> (q8_0 rows, lanec compile's options)
PLANS = {
    "llama-gguf-q8": (True, ["--numerics", "quantized", "--words", "1"]),
    "llama-gguf-q8-fused": (True, ["--numerics", "quantized", "--words", "2", "--fuse-quant"]),
    "llama-gguf-bf16": (False, []),
}
Q8_0 = re.compile(r'(name = "[^"]*(_proj|lm_head)\.weight", format = )"bf16"')


def lanec(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "lanec.cli", *args], check=True, cwd=ROOT)


def build() -> list[Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    from gguf_llama import CONFIG, hf_tensors, write_gguf

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "config.json").write_text(json.dumps(CONFIG, indent=1) + "\n")
    tensors = hf_tensors()
    q8 = {name: "Q8_0" for name in tensors if name.endswith("_proj.weight") or name == "lm_head.weight"}
    write_gguf(GGUF, tensors, q8)
    form = OUT / "model.mlir"
    lanec("import", str(OUT / "config.json"), "--page-size", "16", "--context-pages", "4", "-o", str(form))
    built = []
    for name, (rows_q8, options) in PLANS.items():
        source = form
        if rows_q8:
            source = OUT / f"{name}.mlir"
            source.write_text(Q8_0.sub(r'\1"q8_0"', form.read_text()))
        lanec("compile", *options, str(source), "-o", str(OUT / f"{name}.plan"))
        built.append(OUT / f"{name}.plan")
    return built


if __name__ == "__main__":
    for path in build():
        print(path)
