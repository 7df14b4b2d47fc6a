"""`rope` (rotate-half rotary embedding at each row's position, bf16) against torch's rotate-half as
transformers writes it (cos and sin of positions x inv_freq, `x * cos + rotate_half(x) * sin`) and
the copy bandwidth, measured in the same run. Two steps:

    python bench/rope.py build          # CPU machine: compile into build/bench-rope/
    PYTHONPATH=. python3 bench/rope.py  # GPU machine (carry build/bench-rope): the table

Shapes: Llama-3-8B's query (32 heads x 128) and key (8 x 128) rows, 128 heads of 192 values
with 64 rotated (DeepSeek-V3's query width; the rest of each head copied) at 1, 8, 64 and 256 rows,
theta 500000; positions spread over 0..32k. A decode step's rope reads what the product before it
wrote (L2-resident), so nothing rotates: each op runs in a CUDA graph of 20 replays of itself, the
median replay / 20 is its time. "% copy": the bytes read and written over the copy bandwidth."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import measure  # bench/measure.py: this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench-rope"
THETA = 500000.0
SHAPES = [("llama-3-8b q", 32, 128, 128), ("llama-3-8b k", 8, 128, 128), ("deepseek-v3 q rope", 128, 192, 64)]
ROWS = [1, 8, 64, 256]
OPS = 20  # launches a graph


def problems() -> list[dict]:
    return [dict(label=label, heads=heads, unit=unit, rotary=rotary, rows=rows,
                 stem=f"rope_h{heads}u{unit}r{rotary}_b{rows}")
            for label, heads, unit, rotary in SHAPES for rows in ROWS]


def spec(p: dict) -> dict:
    return dict(rows=p["rows"], heads=p["heads"], unit=p["unit"], rotary=p["rotary"], theta=THETA)


def build() -> None:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.rope import Rope

    start = time.perf_counter()
    listing = problems()
    for p in listing:
        compile_kernel(Rope(**spec(p))).save(OUT, p["stem"])
        print(f"built {p['stem']}  ({time.perf_counter() - start:.0f} s)", flush=True)
    (OUT / "manifest.json").write_text(json.dumps(listing, indent=1) + "\n")


def torch_rope(torch, x, positions, out, heads: int, unit: int, rotary: int):
    """transformers' apply_rotary_pos_emb on each head's first `rotary` values of x into out: the
    anchor, as a function of no arguments."""
    rows = x.shape[0]
    inv_freq = 1.0 / THETA ** (torch.arange(0, rotary, 2, device="cuda", dtype=torch.float32) / rotary)
    heads_view, out_view = x.view(rows, heads, unit), out.view(rows, heads, unit)

    def rotate() -> None:
        angles = positions.float()[:, None] * inv_freq[None, :]
        cos, sin = (torch.cat([f(angles)] * 2, dim=-1)[:, None, :].to(torch.bfloat16)
                    for f in (torch.cos, torch.sin))
        part = heads_view[..., :rotary]
        half = torch.cat([-part[..., rotary // 2:], part[..., :rotary // 2]], dim=-1)
        out_view[..., :rotary] = part * cos + half * sin

    return rotate


def run() -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    from lanec.runtime import driver

    device = driver.Device(0)
    torch.cuda.init()
    torch_stream, ours_stream = torch.cuda.Stream(), driver.Stream()
    copy_bw, _ = measure.ceilings(torch, torch_stream, device.name)
    kernels = measure.Kernels(driver, OUT, ours_stream)
    rows_out = []
    for p in json.loads((OUT / "manifest.json").read_text()):
        rows, heads, unit, rotary = p["rows"], p["heads"], p["unit"], p["rotary"]
        x = torch.randn(rows, heads * unit, dtype=torch.bfloat16, device="cuda")
        out = torch.empty_like(x)
        positions = torch.randint(0, 32768, (rows,), dtype=torch.int32, device="cuda")
        tensors = {"x": x, "positions": positions, "out": out}
        launch = kernels.launch(p["stem"], tensors)
        ours = measure.graph_us(driver, ours_stream, [launch] * OPS) / OPS
        rotate = torch_rope(torch, x, positions, out, heads, unit, rotary)
        anchor = measure.torch_graph_us(torch, torch_stream, lambda rotate=rotate: [rotate() for _ in range(OPS)]) / OPS
        nbytes = 2 * x.numel() * 2
        rows_out.append((p, ours, anchor, nbytes))
        print(f"  {p['label']} rows {rows}: ours {ours:.2f} us  torch {anchor:.2f} us", flush=True)
    print(f"\nGPU: {device.name}; copy {copy_bw / 1e12:.2f} TB/s; theta {THETA:g}")
    print("| shape | rows | KB read + written | ours us | % copy | torch us | torch / ours |")
    print("|---|---|---|---|---|---|---|")
    for p, ours, anchor, nbytes in rows_out:
        share = 100 * nbytes / (ours * 1e-6) / copy_bw
        print(f"| {p['label']} | {p['rows']} | {nbytes / 1e3:.0f} | {ours:.2f} | {share:.1f}% | {anchor:.2f} "
              f"| {anchor / ours:.2f} |")


if __name__ == "__main__":
    measure.main(build, run, "rope.py")
