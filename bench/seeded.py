"""`seeded` (a weight's seeded values made on the GPU, `lanec/runtime/seeded.py`'s generator)
against torch's own generator filling the same buffer (`torch.rand`, Philox) and the copy
bandwidth, measured in the same run. Two steps:

    python bench/seeded.py build          # CPU machine: compile into build/bench-seeded/
    PYTHONPATH=. python3 bench/seeded.py  # GPU machine (carry build/bench-seeded): the table

Sizes: an expert's gate (1024 x 2304), a dense layer's (9216 x 2304), Kimi Linear's lm head
(163840 x 2304) and a 1 GiB block, in bf16 and fp32. Each fill runs in a CUDA graph of 10 fills of
one buffer; a fill's time is the median replay / 10. "% copy": bytes written over the copy
bandwidth (read + write counted), the rate a whole-model fill of 98 GB can reach."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import measure  # bench/measure.py: this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench-seeded"
SIZES = [("expert gate", 1024 * 2304), ("dense gate", 9216 * 2304), ("lm head", 163840 * 2304),
         ("1 GiB", 2**29)]
DTYPES = ["bfloat16", "float32"]
OPS = 10


def problems() -> list[dict]:
    return [dict(label=label, count=count, dtype=dtype, stem=f"seeded_{count}_{dtype}")
            for label, count in SIZES for dtype in DTYPES if count * (2 if dtype == "bfloat16" else 4) <= 2**31]


def build() -> None:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.seeded import Seeded

    start = time.perf_counter()
    listing = problems()
    for p in listing:
        compile_kernel(Seeded(p["count"], p["dtype"])).save(OUT, p["stem"])
        print(f"built {p['stem']}  ({time.perf_counter() - start:.0f} s)", flush=True)
    (OUT / "manifest.json").write_text(json.dumps(listing, indent=1) + "\n")


def run() -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    from lanec.runtime import driver, seeded

    device = driver.Device(0)
    torch.cuda.init()
    torch_stream, ours_stream = torch.cuda.Stream(), driver.Stream()
    copy_bw, _ = measure.ceilings(torch, torch_stream, device.name)
    kernels = measure.Kernels(driver, OUT, ours_stream)
    rows = []
    for p in json.loads((OUT / "manifest.json").read_text()):
        dtype = getattr(torch, p["dtype"])
        out = torch.empty(p["count"], dtype=dtype, device="cuda")
        inputs = {name: torch.from_numpy(value).cuda() for name, value in
                  seeded.kernel_params("bench.weight", 7, 0, 0.02, 0.0).items()}
        tensors = {**inputs, "out": out}
        launch = kernels.launch(p["stem"], tensors)
        ours = measure.graph_us(driver, ours_stream, [launch] * OPS) / OPS
        anchor = measure.torch_graph_us(torch, torch_stream,
                                        lambda out=out: [torch.rand(out.shape, dtype=out.dtype, device="cuda", out=out)
                                                         for _ in range(OPS)]) / OPS
        nbytes = out.numel() * out.element_size()
        rows.append((p, nbytes, ours, anchor))
        print(f"  {p['label']} {p['dtype']}: ours {ours:.1f} us  torch.rand {anchor:.1f} us", flush=True)
        del out
        torch.cuda.empty_cache()
    print(f"\nGPU: {device.name}; copy {copy_bw / 1e12:.2f} TB/s")
    print("| weight | dtype | MB | ours us | % copy | torch.rand us | torch / ours |")
    print("|---|---|---|---|---|---|---|")
    for p, nbytes, ours, anchor in rows:
        share = 100 * nbytes / (ours * 1e-6) / copy_bw
        print(f"| {p['label']} | {p['dtype']} | {nbytes / 1e6:.0f} | {ours:.1f} | {share:.0f}% | {anchor:.1f} "
              f"| {anchor / ours:.2f} |")


if __name__ == "__main__":
    measure.main(build, run, "seeded.py")
