"""What a launch costs when it moves (almost) nothing: chains of launches that only hand a row on,
each in one CUDA graph, to split issue 15's batch-1 gap (220 launches at about 2 us each beyond
their bytes) into the launch hop itself and what the kernels do around it. Two steps:

    python bench/launch_floor.py build      # CPU machine: compile into build/bench/launch_floor/
    PYTHONPATH=. python3 bench/launch_floor.py   # GPU machine: the tables

Three kernels, all bench-only:
- `Hop` (grid of G CTAs, 256 threads): after its PDL wait, thread 0 of CTA c reads word c of the
  previous launch's row and writes it + 1. A chain of hops is the step's launch sequence with the
  work taken out: its time a launch is the floor PDL and the graph leave.
- `Spread` (576 CTAs of 288 threads, mixture_down's grid at batch 1): each CTA scales 4 values of
  the 2304-wide row into `out`. With `tail`, each CTA then draws a ticket (`atom.inc`, the grid's
  count), and the CTA that draws the last norms the whole row into `y` as rmsnorm does: the
  layer's input norm as the last CTA's work, one launch in place of two.
- lanec's own `RmsNorm` (one CTA), the launch that fold would remove.

The pair chains, a launch of each per layer: "apart" (Spread, RmsNorm) x 32, "tail" (Spread with
its tail) x 32, and "alone" (Spread without a norm) x 32. apart - alone is what the norm's launch
costs the chain; tail - alone what the ticket and the last CTA's norm cost."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "build" / "bench" / "launch_floor"
WIDTH = 2304  # Kimi Linear's hidden width: the chains' row (floor_kernels takes it from here)
EPS = 1e-6
CHAIN = 64  # launches a hop chain; pairs a pair chain are CHAIN // 2
HOP_GRIDS = (1, 8, 132, 576, 1152, 6288)  # a norm, a cluster, one an SM, mixture_down, o_proj, the merged product
# the step's cluster launches as hops, each beside the same grid without clusters: (CTAs, cluster, threads)
CLUSTER_HOPS = ((16, 16, 512), (256, 8, 160), (8, 8, 256))  # the batch-1 router, KdaSplit, argmax


def kernels() -> dict:
    """Every launch the chains take, by stem (CuTe DSL: the CPU machine only)."""
    from floor_kernels import Hop, Spread

    from lanec.codegen.kernels.base import released
    from lanec.codegen.kernels.rmsnorm import RmsNorm

    found = {f"hop_g{g}": Hop(g) for g in HOP_GRIDS}
    found.update({f"hop_g{g}_entry": released(Hop(g), "entry") for g in (1, 576, 6288)})
    found.update({f"hop_g{g}_nopdl": Hop(g, pdl=False) for g in (1, 576, 6288)})
    for g, c, t in CLUSTER_HOPS:
        found[f"hop_g{g}_t{t}"] = Hop(g, threads=t)
        found[f"hop_g{g}_t{t}_c{c}"] = Hop(g, cluster=c, threads=t)
    found["spread"] = Spread(False)
    found["spread_tail"] = Spread(True)
    found["norm"] = RmsNorm(1, WIDTH, EPS)
    found["norm_entry"] = released(RmsNorm(1, WIDTH, EPS), "entry")
    return found


def build() -> None:
    from lanec.codegen.compile import compile_kernel

    OUT.mkdir(parents=True, exist_ok=True)
    for stem, kernel in kernels().items():
        compile_kernel(kernel).save(OUT, stem)
        print(f"{stem:20s} grid {kernel.launch().grid[0]}")
    (OUT / "manifest.json").write_text(json.dumps(sorted(kernels())) + "\n")


def run() -> None:
    import measure
    import torch

    from lanec.runtime import driver

    device, stream, kernels_ = measure.warm_kernels(driver, OUT)

    a = torch.randn(WIDTH, device="cuda")
    b = torch.randn(WIDTH, device="cuda")
    print(f"{device.name}: chains of {CHAIN} launches in one CUDA graph; us a launch (median of 25 replays)")
    print("| launch | CTAs | PDL | release | us a launch |")
    print("|---|---|---|---|---|")
    hops = [(f"hop_g{g}", g, "yes", "wait") for g in HOP_GRIDS]
    hops += [(f"hop_g{g}_entry", g, "yes", "entry") for g in (1, 576, 6288)]
    hops += [(f"hop_g{g}_nopdl", g, "no", "-") for g in (1, 576, 6288)]
    for stem, g, pdl, release in hops:
        chain = [kernels_.launch(stem, {"x": a, "out": b} if i % 2 == 0 else {"x": b, "out": a})
                 for i in range(CHAIN)]
        print(f"| hop | {g} | {pdl} | {release} | {measure.graph_us(driver, stream, chain, 25) / CHAIN:.2f} |",
              flush=True)

    # the cluster hops: each alone in a chain, and each after a Spread launch (576 CTAs on the SMs, as the step's
    # router, KdaSplit and argmax follow a wide launch); us a launch, and a pair less the Spread-alone chain
    row = torch.randn(1, WIDTH, dtype=torch.bfloat16, device="cuda")
    w1 = torch.randn(WIDTH, dtype=torch.bfloat16, device="cuda")
    spread_in = {"x": row, "w": w1, "out": torch.empty_like(row)}
    pairs = CHAIN // 2
    alone = measure.graph_us(driver, stream, [kernels_.launch("spread", spread_in) for _ in range(pairs)], 25) / pairs
    print(f"\ncluster launches as hops (Spread alone {alone:.2f} us a launch)")
    print("| CTAs | threads | cluster | us a launch, chained | over Spread, after one |")
    print("|---|---|---|---|---|")
    for g, c, t in CLUSTER_HOPS:
        for stem, cluster in ((f"hop_g{g}_t{t}", 1), (f"hop_g{g}_t{t}_c{c}", c)):
            chain = [kernels_.launch(stem, {"x": a, "out": b} if i % 2 == 0 else {"x": b, "out": a})
                     for i in range(CHAIN)]
            alone_us = measure.graph_us(driver, stream, chain, 25) / CHAIN
            pair = [launch for _ in range(pairs) for launch in (kernels_.launch("spread", spread_in),
                                                                 kernels_.launch(stem, {"x": a, "out": b}))]
            after = measure.graph_us(driver, stream, pair, 25) / pairs - alone
            print(f"| {g} | {t} | {cluster} | {alone_us:.2f} | {after:.2f} |", flush=True)

    # the pair chains: the normed row `a`, the spread row `b`
    rows = {name: torch.randn(1, WIDTH, dtype=torch.bfloat16, device="cuda") for name in ("a", "b")}
    w = torch.randn(WIDTH, dtype=torch.bfloat16, device="cuda")
    tickets = torch.zeros(2, dtype=torch.int32, device="cuda")
    pairs = CHAIN // 2
    spread = {"x": rows["a"], "w": w, "out": rows["b"]}
    norm = {"x": rows["b"], "w": w, "y": rows["a"]}
    chains = {
        "alone": [kernels_.launch("spread", spread) for _ in range(pairs)],
        "apart": [kernels_.launch(stem, tensors) for _ in range(pairs)
                  for stem, tensors in (("spread", spread), ("norm", norm))],
        "apart, norm at entry": [kernels_.launch(stem, tensors) for _ in range(pairs)
                                 for stem, tensors in (("spread", spread), ("norm_entry", norm))],
        "tail": [kernels_.launch("spread_tail", {**spread, "tickets": tickets, "y": rows["a"]})
                 for _ in range(pairs)],
    }
    times = {name: measure.graph_us(driver, stream, chain, 25) / pairs for name, chain in chains.items()}
    print(f"\n{pairs} layers a chain: a Spread launch (576 CTAs) and the layer's norm; us a layer")
    print("| chain | launches a layer | us a layer | over alone |")
    print("|---|---|---|---|")
    for name, us in times.items():
        per = 2 if name.startswith("apart") else 1
        print(f"| {name} | {per} | {us:.2f} | {us - times['alone']:+.2f} |")
    # the tail's norm against the norm launch's, on the same input: the fold is only worth measuring if right
    ref_b = rows["a"].float() * 1.5
    kernels_.launch("spread_tail", {**spread, "tickets": tickets, "y": rows["a"]}).enqueue()
    stream.synchronize()
    b_bf16 = ref_b.to(torch.bfloat16).float()
    ref_y = (b_bf16 * torch.rsqrt((b_bf16 * b_bf16).mean() + EPS) * w.float()).to(torch.bfloat16).float()
    err = (rows["a"].float() - ref_y).abs().max().item() / ref_y.abs().max().item()
    print(f"\nthe tail's norm against torch's on the last input: max error {err:.2e} of the largest")


if __name__ == "__main__":
    import measure

    measure.main(build, run, "launch_floor.py")
