"""Where the batch-1 router's time goes: mixture_router at Kimi Linear's shape (one row of 2304, the
layer's norm folded in, 256 experts, top 8, sigmoid with the correction), in a PDL chain as the step
runs it, whole and with one stage taken out at a time. Two steps:

    python bench/router_chain.py build         # CPU machine: compile into build/bench/router_chain/
    PYTHONPATH=.:bench python3 bench/router_chain.py   # GPU machine: the table

bench/graph_profile.py put each of the real-size step's 26 routers at 6.4-6.9 us in the graph for
0.3 us of bytes (2026-12-02): 170 us of the batch-1 step. Each chain here is 32 layers of a `Spread`
launch (576 CTAs writing the row, mixture_down's grid; bench/floor_kernels.py) and then the router on
that row, in one CUDA graph; the router's cost is the chain's time a layer less the Spread-alone
chain's. The variants (bench-only: those with a stage taken out choose wrong experts, and are
timing probes, not routers):
- `whole`: the router as the plan has it (split over a cluster of 16 CTAs of 16 warps, released at
  its entry);
- `no-choose`: lane 0 writes the first 8 experts in place of the whole choice;
- `no-sigmoid`: the choice on the logits themselves (no sigmoid); `no-rounds`: the first 8 experts taken in
  place of the sort and the top-8 rounds (the sigmoids, the correction and the weights kept);
- `no-exchange`: no scores sent to the first CTA and no barrier for them (CTA 0 chooses from its own 16);
- `late-sigmoid`: the sigmoids taken by the choosing warp, not where each logit is dotted (a router still: the
  kernel before the twenty-third session);
- `with shared`: the router's launch running the shared expert's gated pair too (ROUTER_SHARED_ROWS: 64 more CTAs in
  4 clusters), the 9.4 MB it reads beside the router's work;
- `no-norm`: the router on a normed row (fold-norm-into-router off: no residual sum, no norm);
- `split 8`, `split 4`, `split 2`: the router rows over fewer CTAs (a portable cluster of 8 CTAs of 32 warps, the
  split before ROUTER_CTA_ROWS; 2 and 4 rows a warp)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "build" / "bench" / "router_chain"
WIDTH, EXPERTS, TOP_K, EPS = 2304, 256, 8, 1e-5
SHARED = 1024  # Kimi Linear's shared expert's units (and a routed expert's)
LAYERS = 32
KIMI = {"rows": 1, "width": WIDTH, "experts": EXPERTS, "top_k": TOP_K, "scoring": "sigmoid", "renormalize": True,
        "routed_scaling": 2.446, "correction": True, "norm": True, "eps": EPS, "residual": True}


def probe_class():
    """The timing probe's class (CuTe DSL: imported on the CPU machine only)."""
    import cutlass
    import cutlass.cute as cute

    from lanec.codegen.kernels.mixture import MixtureRouter

    class Probe(MixtureRouter):
        """mixture_router with one stage taken out (`skip`: "choose", "sigmoid", "rounds" or "exchange"), for
        timing only; or "early-sigmoid": the sigmoids taken by the choosing warp (a router still)."""

        def __init__(self, skip: str, **spec):
            super().__init__(**spec)
            self.skip = skip

        def early_scores(self):
            return MixtureRouter.early_scores(self) and self.skip not in ("sigmoid", "early-sigmoid")

        @cute.jit
        def choose(self, scores, choice, kept, correction, ids, weights, row, lane, prefetch=None):
            if cutlass.const_expr(self.skip == "choose"):
                if lane < self.top_k:
                    ids[row, lane] = lane
                    weights[row, lane] = scores[lane]
            else:
                MixtureRouter.choose(self, scores, choice, kept, correction, ids, weights, row, lane, prefetch)

        @cute.jit
        def scored(self, value, taken):
            if cutlass.const_expr(self.skip != "sigmoid"):
                MixtureRouter.scored(self, value, taken)

        @cute.jit
        def top_k_of(self, value, taken, lane):
            if cutlass.const_expr(self.skip == "rounds"):  # the first top_k experts, the values unread
                chosen = cute.make_rmem_tensor(self.top_k, cutlass.Int32)
                for k in cutlass.range_constexpr(self.top_k):
                    chosen[k] = cutlass.Int32(k)
                return chosen
            return MixtureRouter.top_k_of(self, value, taken, lane)

        def pushes(self):  # "exchange": each CTA keeps its scores (the first chooses from its own)
            return MixtureRouter.pushes(self) and self.skip != "exchange"

    return Probe


def kernels() -> dict:
    """Every launch the chains take, by stem (CuTe DSL: the CPU machine only)."""
    from floor_kernels import Spread

    from lanec.codegen.kernels.base import released
    from lanec.codegen.kernels.mixture import MixtureRouter

    Probe = probe_class()
    return {"spread": Spread(False),
            "whole": released(MixtureRouter(**KIMI), "entry"),
            "no-choose": released(Probe("choose", **KIMI), "entry"),
            "no-sigmoid": released(Probe("sigmoid", **KIMI), "entry"),
            "no-rounds": released(Probe("rounds", **KIMI), "entry"),
            "no-exchange": released(Probe("exchange", **KIMI), "entry"),
            "late-sigmoid": released(Probe("early-sigmoid", **KIMI), "entry"),
            "with shared": released(MixtureRouter(**KIMI, shared_hidden=1024, expert_hidden=1024), "entry"),
            "no-norm": released(MixtureRouter(**{**KIMI, "norm": False, "residual": False}), "entry"),
            "split 4": released(MixtureRouter(**KIMI, split=4), "entry"),
            "split 2": released(MixtureRouter(**KIMI, split=2), "entry"),
            "split 8": released(MixtureRouter(**KIMI, split=8), "entry")}


def file_stem(name: str) -> str:
    return name.replace(" ", "_")


def build() -> None:
    from lanec.codegen.compile import compile_kernel

    OUT.mkdir(parents=True, exist_ok=True)
    built = kernels()
    for name, kernel in built.items():
        compile_kernel(kernel).save(OUT, file_stem(name))
        shape = kernel.launch()
        print(f"{name:12s} grid {shape.grid} block {shape.block[0]}")
    (OUT / "manifest.json").write_text(json.dumps(list(built)) + "\n")  # the table's rows, in this order


def run() -> None:
    import measure
    import torch

    from lanec.runtime import driver

    device, stream, kernels_ = measure.warm_kernels(driver, OUT, 200)

    def bf16(*shape):
        return torch.randn(*shape, device="cuda").to(torch.bfloat16)

    t = {"a": bf16(1, WIDTH), "row": bf16(1, WIDTH), "w": bf16(WIDTH), "residual": bf16(1, WIDTH),
         "norm_w": bf16(WIDTH), "router": bf16(EXPERTS, WIDTH) * 0.05,
         "correction": torch.randn(EXPERTS, device="cuda") * 0.01,
         "ids": torch.zeros(1, TOP_K, dtype=torch.int32, device="cuda"),
         "weights": torch.zeros(1, TOP_K, device="cuda"), "y": bf16(1, WIDTH), "h": bf16(1, WIDTH),
         "shared_gate": bf16(SHARED, WIDTH), "shared_up": bf16(SHARED, WIDTH), "hidden": bf16(1, (TOP_K + 1) * SHARED)}
    spread = {"x": t["a"], "w": t["w"], "out": t["row"]}
    router = {**t, "x": t["row"]}
    alone = measure.graph_us(driver, stream, [kernels_.launch("spread", spread) for _ in range(LAYERS)], 25) / LAYERS
    print(f"{device.name}: {LAYERS} layers a chain, one CUDA graph, PDL; us a layer (median of 25 replays)")
    print(f"Spread alone: {alone:.2f} us a layer\n")
    print("| router | CTAs x threads | registers, local bytes | us a layer | router us (over Spread alone) |")
    print("|---|---|---|---|---|")
    # a cubin saved as before_<stem> (a copy from an earlier build) is timed beside the current one
    before = sorted(p.stem for p in OUT.glob("before_*.cubin"))
    routers = [name for name in json.loads((OUT / "manifest.json").read_text()) if name != "spread"]
    for name in (*before, *routers):
        chain = [kernels_.launch(stem, tensors) for _ in range(LAYERS)
                 for stem, tensors in (("spread", spread), (file_stem(name), router))]
        us = measure.graph_us(driver, stream, chain, 25) / LAYERS
        art, function = kernels_.loaded[file_stem(name)]
        registers, local = function.resources()
        print(f"| {name} | {art.launch.grid[0]} x {art.launch.block[0]} | {registers}, {local} | {us:.2f} | "
              f"{us - alone:.2f} |", flush=True)


if __name__ == "__main__":
    import measure

    measure.main(build, run, "router_chain.py")
