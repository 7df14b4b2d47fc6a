"""The mixture of experts at decode: our three launches (`mixture_router`, `mixture_gated`,
`mixture_down`, in sequence as `lower_mixture` runs them) against SGLang's Triton fused MoE, a
torch reference and the byte roofline, measured in the same run. Two steps:

    python bench/mixture.py build          # CPU machine: compile into build/bench-mixture/
    python .anchors/make_vendor.py         # once: SGLang's kernels into .anchors/vendor (not committed)
    PYTHONPATH=. python3 bench/mixture.py  # GPU machine (carry build/bench-mixture, .anchors)

Shapes: 256 experts, top 8, sigmoid scores with a correction bias for choosing, the chosen scores
renormalised, one shared expert folded into the expert launches; batch 1, 4, 8, 16, 64, 256:
- Kimi Linear: width 2304, experts of 1024 units, shared expert of 1024, routed scaling 2.446.
- DeepSeek-V3: width 7168, experts of 2048 units, shared expert of 2048, grouped top-k (the best
  4 of 8 groups), routed scaling 2.5.
LANEC_MIXTURE_MODELS=kimi-linear (a comma list of labels) runs only those models, and
LANEC_MIXTURE_BATCHES=64,256 only those batches (at build time too: only their kernels are built).
LANEC_MIXTURE_BLOCKS="16,32:4,64" (at build time) adds grouped variants: the routed gated and down
kernels with `group_rows` G (an expert's rows a pass over a weight tile) and, after a colon, S
stages; each is timed as "grouped experts only" on the same routings, a line a variant.
LANEC_ROUTER_ROWS="2,4,8" (at build time) adds routers scoring R rows a cluster (`rows_a_cta`) at
the grouped batches; the router alone is timed at one row a cluster and at each R, a line a shape.
LANEC_MIXTURE_PARTS=1 (at run time) times each launch of the grouped path alone, its `steps` launches in
a graph of their own (the router on its steps' x, the others on SGLang's routings, with the shared
expert and without), a line a shape: where the grouped path's time beyond its experts goes.

Method: clocks warmed by a few seconds of matmuls, then torch's 1 GiB copy_ (read + write
counted). Weights random bf16 (normal, std 0.02), x random normal. A layer's routed experts are
one copy (3.6 GB at Kimi Linear, 22.5 GB at DeepSeek-V3); a CUDA graph holds `steps` steps, each
with its own x, so our router picks other experts each step; the shared expert and the router
(the weights every step reads) rotate over enough copies to pass 256 MB (4x the L2), and steps =
max(8, those copies). A step's time is the median graph replay / the steps. A model whose weights
do not fit in the free memory is skipped.
- ours: router + gated + down, the three launches with PDL, the router choosing the experts.
- % of roofline: roofline / ours; roofline = bytes of the step's distinct chosen experts (gate,
  up and down rows) + the shared expert + the router, over the copy bandwidth (mean over steps).
- experts only: our gated + down, built without the shared expert (SGLang's fused MoE has none),
  on precomputed routings (uniform distinct top-k a row, random weights summing to 1, as the
  anchors probe draws them; one a step), the routings SGLang gets.
- SGLang: 0.5.23's Triton fused MoE (up GEMM, SiLU*mul, down GEMM with the routing weight, top-k
  sum), as the anchors probe (`.anchors/bench_anchors.py`) calls it (`MoeCase`), timed by its own
  graph (`bench`); routing and alignment precomputed. A missing .anchors leaves it empty.
  "SGLang / experts only" compares the two on the same routings and bytes.
- grouped (batch 4 to 256): the grouped experts' path (`lanec compile --grouped-experts`):
  router, mixture_groups, mixture_grouped_gated, mixture_grouped_down, mixture_sum, the shared
  expert's blocks more grid rows of the grouped launches; "grouped experts only" the same four without the
  shared expert, on the routings SGLang gets ("SGLang / grouped" compares the two).
- torch: the router product (F.linear, bf16, cuBLAS), sigmoid, correction, (grouped) topk, then a
  loop over the step's chosen experts (index_select, F.linear of gate and up, SiLU*up, F.linear
  down, index_add_ weighted) and the shared expert, under a CUDA graph over the same memory; the
  loop's experts are fixed at capture by running the same router once (same x, same choice).
"x" columns: anchor time / ours (> 1: ours is faster). Each shape's line also says on how many
rows our router chose the experts torch's did, and ours against torch's output on those rows
(max abs difference / max abs)."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import measure  # bench/measure.py: this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench-mixture"

# (label, experts, top_k, width, expert units, shared expert units, groups, topk_groups, routed scaling)
MODELS = [
    ("kimi-linear", 256, 8, 2304, 1024, 1024, None, None, 2.446),
    ("deepseek-v3", 256, 8, 7168, 2048, 2048, 8, 4, 2.5),
]
BATCHES = [1, 4, 8, 16, 64, 256]
ONLY = [label for label in os.environ.get("LANEC_MIXTURE_MODELS", "").split(",") if label]
ONLY_BATCHES = [int(b) for b in os.environ.get("LANEC_MIXTURE_BATCHES", "").split(",") if b]
VARIANTS = [v for v in os.environ.get("LANEC_MIXTURE_BLOCKS", "").split(",") if v]  # "G" or "G:S"
ROUTER_ROWS = [int(r) for r in os.environ.get("LANEC_ROUTER_ROWS", "").split(",") if r]
PARTS = os.environ.get("LANEC_MIXTURE_PARTS") == "1"
ROLES = ["router", "gated", "down", "gated_routed", "down_routed"]  # *_routed: without the shared expert
GROUPED_BATCHES = [4, 8, 16, 64, 256]  # the grouped path's kernels are built and timed at these batches
GROUPED_ROLES = ["groups", "grouped_gated", "grouped_down", "grouped_sum", "grouped_gated_routed",
                 "grouped_down_routed", "grouped_sum_routed"]
SCALE = 0.02  # the weights' standard deviation
CORRECTION = 0.01  # the correction bias's: small beside the scores, so x still decides the choice
ROTATE_BYTES = 256 * 2**20
MIN_STEPS = 8
REPEATS = 15


def problems() -> list[dict]:
    """Every benchmark shape with its kernels' artifact stems."""
    found = []
    for label, experts, top_k, width, hidden, shared, groups, topk_groups, scaling in MODELS:
        for batch in BATCHES:
            found.append(dict(label=label, experts=experts, top_k=top_k, width=width, hidden=hidden,
                              shared_hidden=shared, groups=groups, topk_groups=topk_groups, routed_scaling=scaling,
                              batch=batch, stems={role: f"{role}_{label}_b{batch}" for role in
                                                  ROLES + (GROUPED_ROLES if batch in GROUPED_BATCHES else [])}))
            if batch in GROUPED_BATCHES:
                found[-1]["stems"].update({f"{role}_{v}": f"{role}_{label}_b{batch}_g{v.replace(':', 's')}"
                                           for v in VARIANTS
                                           for role in ("grouped_gated_routed", "grouped_down_routed")})
                found[-1]["stems"].update({f"router_r{r}": f"router_{label}_b{batch}_r{r}" for r in ROUTER_ROWS})
    return found


def selected(p: dict) -> bool:
    """Whether LANEC_MIXTURE_MODELS and LANEC_MIXTURE_BATCHES keep the shape."""
    return (not ONLY or p["label"] in ONLY) and (not ONLY_BATCHES or p["batch"] in ONLY_BATCHES)


def kernels(p: dict) -> dict:
    """The shape's kernels by role: the three launches of a step, and the expert pair without the
    shared expert."""
    from lanec.codegen.kernels.mixture import MixtureDown, MixtureGated, MixtureGroups, MixtureRouter
    from lanec.codegen.kernels.mixture_grouped import MixtureGroupedDown, MixtureGroupedGated, MixtureSum

    def router_of(**knobs):
        return MixtureRouter(p["batch"], p["width"], p["experts"], p["top_k"], scoring="sigmoid", renormalize=True,
                             routed_scaling=p["routed_scaling"], correction=True, groups=p["groups"],
                             topk_groups=p["topk_groups"], **knobs)

    router = router_of()
    spec = dict(rows=p["batch"], width=p["width"], hidden=p["hidden"], experts=p["experts"], top_k=p["top_k"])
    made = {"router": router, "gated": MixtureGated(**spec, shared_hidden=p["shared_hidden"]),
            "down": MixtureDown(**spec, shared_hidden=p["shared_hidden"]),
            "gated_routed": MixtureGated(**spec), "down_routed": MixtureDown(**spec)}
    if p["batch"] in GROUPED_BATCHES:
        made.update(groups=MixtureGroups(p["batch"], p["experts"], p["top_k"]),
                    grouped_gated=MixtureGroupedGated(**spec, shared_hidden=p["shared_hidden"]),
                    grouped_down=MixtureGroupedDown(**spec, shared_hidden=p["shared_hidden"]),
                    grouped_sum=MixtureSum(p["batch"], p["width"], p["top_k"], shared=True),
                    grouped_gated_routed=MixtureGroupedGated(**spec), grouped_down_routed=MixtureGroupedDown(**spec),
                    grouped_sum_routed=MixtureSum(p["batch"], p["width"], p["top_k"]))
        made.update({f"router_r{r}": router_of(rows_a_cta=r) for r in ROUTER_ROWS})
        for v in VARIANTS:
            group_rows, _, stages = v.partition(":")
            knobs = dict(group_rows=int(group_rows), stages=int(stages) if stages else None)
            made[f"grouped_gated_routed_{v}"] = MixtureGroupedGated(**spec, **knobs)
            made[f"grouped_down_routed_{v}"] = MixtureGroupedDown(**spec, **knobs)
    return made


def build() -> None:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel

    listing, count = [p for p in problems() if selected(p)], 0
    start = time.perf_counter()
    for p in listing:
        for role, kernel in kernels(p).items():  # one at a time: the CPU machine's cores are shared
            compile_kernel(kernel).save(OUT, p["stems"][role])
            count += 1
            print(f"built {p['stems'][role]}  ({time.perf_counter() - start:.0f} s)", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "manifest.json").write_text(json.dumps(listing, indent=1) + "\n")
    print(f"{count} kernels for {len(listing)} problems in {OUT.relative_to(ROOT)}")


def run() -> None:
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(ROOT))
    from lanec.runtime import driver

    device = driver.Device(0)
    torch.cuda.init()
    anchors = measure.load_anchors("fused_moe_triton_kernels.py")
    props = torch.cuda.get_device_properties(0)
    listing = [p for p in json.loads((OUT / "manifest.json").read_text()) if selected(p)]
    torch_stream = torch.cuda.Stream()
    ours_stream = driver.Stream()

    def events_us(fn, repeats=REPEATS) -> float:
        return measure.events_us(torch, torch_stream, fn, repeats)

    copy_bw, _ = measure.ceilings(torch, torch_stream, device.name)

    l2 = getattr(props, "L2_cache_size", 60 * 2**20) or 60 * 2**20
    rotate = max(4 * l2, ROTATE_BYTES)
    bf = dict(dtype=torch.bfloat16, device="cuda")

    kernels = measure.Kernels(driver, OUT, ours_stream)

    def ours_us(launches: list, steps: int) -> float:
        """Our `launches` (`steps` steps of them) in one graph: us a step."""
        torch.cuda.synchronize()
        return measure.graph_us(driver, ours_stream, launches, REPEATS) / steps

    def random_routing(batch: int, experts: int, top_k: int):
        """Uniform distinct top_k experts a row and random positive weights summing to 1 (the
        anchors probe's draw): (weights fp32 [batch, top_k], ids int32 [batch, top_k])."""
        ids = torch.rand(batch, experts, device="cuda").topk(top_k, dim=-1).indices
        w = torch.rand(batch, top_k, device="cuda") + 0.1
        return (w / w.sum(-1, keepdim=True)).contiguous(), ids.to(torch.int32).contiguous()

    def time_shape(p: dict, weights: dict, copies: int) -> tuple:
        """One shape: (steps, mean distinct experts a step, bytes a step, ours, experts only, SGLang, torch us)."""
        E, K, H, U, Us, B = p["experts"], p["top_k"], p["width"], p["hidden"], p["shared_hidden"], p["batch"]
        w = weights
        steps = max(MIN_STEPS, copies)
        loaded = p["stems"]  # role -> the stem of its kernel
        xs = torch.randn(steps, B, H, **bf)
        ids = torch.empty(steps, B, K, dtype=torch.int32, device="cuda")
        routing = torch.empty(steps, B, K, dtype=torch.float32, device="cuda")
        between = torch.empty(B, K * U + Us, **bf)
        outs = torch.empty(steps, B, H, **bf)
        launches = []
        for s in range(steps):
            c = s % copies
            tensors = {"x": xs[s], "router": w["router"][c], "correction": w["correction"][c], "ids": ids[s],
                       "weights": routing[s], "gate": w["gate"], "up": w["up"], "shared_gate": w["shared_w1"][c, :Us],
                       "shared_up": w["shared_w1"][c, Us:], "hidden": between, "down": w["down"],
                       "shared_down": w["shared_down"][c], "out": outs[s]}
            launches += [kernels.launch(loaded[role], tensors) for role in ("router", "gated", "down")]
        ours = ours_us(launches, steps)
        distinct = [torch.unique(ids[s]).numel() for s in range(steps)]
        expert_bytes, fixed_bytes = 3 * H * U * 2, 3 * H * Us * 2 + E * H * 2
        step_bytes = sum(distinct) / steps * expert_bytes + fixed_bytes

        # experts only: our pair without the shared expert, on the routings SGLang gets
        draws = [random_routing(B, E, K) for _ in range(steps)]
        between_routed, out_routed = torch.empty(B, K * U, **bf), torch.empty(B, H, **bf)
        launches = [kernels.launch(loaded[role], {"x": xs[0], "ids": tid, "weights": tw, "gate": w["gate"],
                                                  "up": w["up"], "hidden": between_routed, "down": w["down"],
                                                  "out": out_routed})
                    for tw, tid in draws for role in ("gated_routed", "down_routed")]
        experts_only = ours_us(launches, steps)

        grouped, grouped_only = float("nan"), float("nan")
        if "groups" in loaded:  # the grouped path: the same router, then its four launches
            i32 = dict(dtype=torch.int32, device="cuda")
            places = {"starts": torch.empty(E + 1, **i32), "order": torch.empty(B * K, **i32),
                      "hidden": torch.empty(B * K, U, **bf), "shared": torch.empty(B, Us, **bf),
                      "partial": torch.empty(B * (K + 1), H, dtype=torch.float32, device="cuda")}
            launches = []
            for s in range(steps):
                c = s % copies
                tensors = {"x": xs[s], "router": w["router"][c], "correction": w["correction"][c], "ids": ids[s],
                           "weights": routing[s], "gate": w["gate"], "up": w["up"], "down": w["down"],
                           "shared_gate": w["shared_w1"][c, :Us], "shared_up": w["shared_w1"][c, Us:],
                           "shared_down": w["shared_down"][c], "out": outs[s], **places}
                launches += [kernels.launch(loaded[role], tensors) for role in
                             ("router", "groups", "grouped_gated", "grouped_down", "grouped_sum")]
            grouped = ours_us(launches, steps)

            def grouped_only_us(gated: str, down: str) -> float:
                """The grouped path's four launches without the shared expert, on SGLang's routings."""
                return ours_us([kernels.launch(loaded[role], {"x": xs[0], "ids": tid, "weights": tw, "gate": w["gate"],
                                                              "up": w["up"], "down": w["down"], "out": out_routed,
                                                              **places})
                                for tw, tid in draws for role in ("groups", gated, down, "grouped_sum_routed")], steps)

            grouped_only = grouped_only_us("grouped_gated_routed", "grouped_down_routed")
            if PARTS:
                def shared_of(s: int) -> dict:  # the shared expert's weights, rotated past L2 as the steps' are
                    c = s % copies
                    return {"shared_gate": w["shared_w1"][c, :Us], "shared_up": w["shared_w1"][c, Us:],
                            "shared_down": w["shared_down"][c]}

                with_shared = ours_us([kernels.launch(loaded[role], {
                    "x": xs[0], "ids": tid, "weights": tw, "gate": w["gate"], "up": w["up"], "down": w["down"],
                    **shared_of(s), "out": out_routed, **places})
                    for s, (tw, tid) in enumerate(draws)
                    for role in ("groups", "grouped_gated", "grouped_down", "grouped_sum")], steps)
                alone = {}
                for role in ("router", "groups", "grouped_gated", "grouped_down", "grouped_sum", "grouped_gated_routed",
                             "grouped_down_routed", "grouped_sum_routed"):
                    alone[role] = ours_us([kernels.launch(loaded[role], {
                        "x": xs[s], "router": w["router"][s % copies], "correction": w["correction"][s % copies],
                        "ids": ids[s] if role == "router" else draws[s][1],
                        "weights": routing[s] if role == "router" else draws[s][0],
                        "gate": w["gate"], "up": w["up"], "down": w["down"], **shared_of(s), "out": out_routed,
                        **places}) for s in range(steps)], steps)
                print(f"  {p['label']} b{B} grouped parts: four launches with the shared expert {with_shared:.1f} us, "
                      f"without {grouped_only:.1f}; alone: " + ", ".join(f"{r} {t:.1f}" for r, t in alone.items()),
                      flush=True)
            routers = sorted(int(role.removeprefix("router_r")) for role in loaded if role.startswith("router_r"))
            if routers:  # the router alone: one row a cluster, then each built block
                times = []
                for r in [None, *routers]:
                    role = "router" if r is None else f"router_r{r}"
                    launches = [kernels.launch(loaded[role], {"x": xs[s], "router": w["router"][s % copies],
                                                              "correction": w["correction"][s % copies],
                                                              "ids": ids[s], "weights": routing[s]})
                                for s in range(steps)]
                    times.append(f"{r or 1} rows a cluster {ours_us(launches, steps):.1f} us")
                print(f"  {p['label']} b{B} router alone: " + ", ".join(times), flush=True)
            built = [role.removeprefix("grouped_gated_routed_") for role in loaded
                     if role.startswith("grouped_gated_routed_")]  # the build's LANEC_MIXTURE_BLOCKS
            for v in built:
                print(f"  {p['label']} b{B} grouped experts only, group_rows:stages {v}: "
                      f"{grouped_only_us(f'grouped_gated_routed_{v}', f'grouped_down_routed_{v}'):.1f} us", flush=True)

        sgl_us = float("nan")
        if anchors is not None:
            try:
                case = anchors.MoeCase(x=xs[0], w1=w["w1"], w2=w["down"], topk=K, draws=draws)
                sgl_us, _ = anchors.bench([case.op(d) for d in range(steps)])
                del case
            except Exception as exc:  # an anchor failing costs its cell, not the table
                print(f"  SGLang failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
            torch.cuda.empty_cache()

        def torch_router(s: int):
            c = s % copies
            scores = F.linear(xs[s], w["router"][c]).float().sigmoid()
            choice = scores + w["correction"][c]
            if p["groups"]:
                G = p["groups"]
                ranks = choice.view(B, G, E // G).topk(2, dim=-1).values.sum(-1)
                kept = torch.zeros_like(ranks).scatter_(1, ranks.topk(p["topk_groups"], dim=-1).indices, 1.0)
                choice = choice.masked_fill(kept[:, :, None].expand(B, G, E // G).reshape(B, E) == 0, -math.inf)
            chosen = choice.topk(K, dim=-1).indices
            picked = scores.gather(1, chosen)
            return chosen, picked / picked.sum(-1, keepdim=True) * p["routed_scaling"]

        torch_out = torch.empty(steps, B, H, **bf)
        total = torch.empty(B, H, dtype=torch.float32, device="cuda")

        def torch_step(s: int, experts: list):
            c = s % copies
            _, picked = torch_router(s)
            h = F.linear(xs[s], w["shared_w1"][c])
            total.copy_(F.linear(F.silu(h[:, :Us]) * h[:, Us:], w["shared_down"][c]))
            for e, rows, slots in experts:
                h = F.linear(xs[s].index_select(0, rows), w["w1"][e])
                y = F.linear(F.silu(h[:, :U]) * h[:, U:], w["down"][e])
                total.index_add_(0, rows, y.float() * picked[rows, slots][:, None])
            torch_out[s].copy_(total)

        torch_us, agree, err = float("nan"), None, float("nan")
        try:
            with torch.cuda.stream(torch_stream):
                torch_ids, chosen = [], []
                for s in range(steps):  # the experts each step's router picks, fixed for the capture
                    picks = torch_router(s)[0].cpu()
                    torch_ids.append(picks.sort(-1).values)
                    chosen.append([(e, *(i.cuda() for i in (picks == e).nonzero(as_tuple=True)))
                                   for e in torch.unique(picks).tolist()])
                for s in range(steps):
                    torch_step(s, chosen[s])
                torch_stream.synchronize()
                torch_graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(torch_graph, stream=torch_stream):
                    for s in range(steps):
                        torch_step(s, chosen[s])
            for _ in range(3):
                with torch.cuda.stream(torch_stream):
                    torch_graph.replay()
            torch_us = events_us(torch_graph.replay) / steps
            torch_stream.synchronize()
            del torch_graph
            agree = (ids.long().sort(-1).values.cpu() == torch.stack(torch_ids)).all(-1).cuda()
            if agree.any():
                ref = torch_out[agree].float()
                err = ((outs[agree].float() - ref).abs().max() / ref.abs().max()).item()
        except Exception as exc:
            print(f"  torch failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
        check = "" if agree is None else (f"  same experts as torch on {int(agree.sum())}/{agree.numel()} rows, "
                                          f"ours vs torch {err:.1e}")
        print(f"  {p['label']} b{B} ({steps} steps, {sum(distinct) / steps:.1f} experts a step): ours {ours:.1f} us  "
              f"experts only {experts_only:.1f}  grouped {grouped:.1f}  grouped experts only {grouped_only:.1f}  "
              f"SGLang {sgl_us:.1f}  torch {torch_us:.1f}  roofline "
              f"{step_bytes / copy_bw * 1e6:.1f} us{check}", flush=True)
        return steps, sum(distinct) / steps, step_bytes, ours, experts_only, grouped, grouped_only, sgl_us, torch_us

    rows = []
    for label in dict.fromkeys(p["label"] for p in listing):
        shapes = [p for p in listing if p["label"] == label]
        E, H, U, Us = (shapes[0][k] for k in ("experts", "width", "hidden", "shared_hidden"))
        fixed_bytes = 3 * H * Us * 2 + E * H * 2  # the shared expert and the router: read every step
        copies = max(1, math.ceil(rotate / fixed_bytes))
        need = E * 5 * H * U * 2 + copies * (fixed_bytes + 4 * E)  # gate, up, down, and SGLang's w1 (gate + up)
        free, _ = torch.cuda.mem_get_info()
        if need > 0.9 * free:
            print(f"  {label}: skipped: its weights take {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free", flush=True)
            continue
        weights = {"gate": torch.empty(E, U, H, **bf).normal_(0.0, SCALE),
                   "up": torch.empty(E, U, H, **bf).normal_(0.0, SCALE),
                   "down": torch.empty(E, H, U, **bf).normal_(0.0, SCALE),
                   "shared_w1": torch.empty(copies, 2 * Us, H, **bf).normal_(0.0, SCALE),  # gate rows, then up rows
                   "shared_down": torch.empty(copies, H, Us, **bf).normal_(0.0, SCALE),
                   "router": torch.empty(copies, E, H, **bf).normal_(0.0, SCALE),
                   "correction": torch.empty(copies, E, dtype=torch.float32, device="cuda").normal_(0.0, CORRECTION)}
        weights["w1"] = torch.cat((weights["gate"], weights["up"]), dim=1)  # SGLang's and torch's [E, 2 U, H]
        for p in shapes:
            rows.append((p, *time_shape(p, weights, copies)))
            torch.cuda.empty_cache()
        del weights
        torch.cuda.empty_cache()

    print()
    print(f"GPU: {device.name}; copy {copy_bw / 1e12:.2f} TB/s (read + write); 256 experts, top 8, a shared expert")
    print("| model | batch | steps | experts a step | MB a step | ours us | % of roofline | experts only us "
          "| grouped us | grouped experts only us | SGLang fused MoE us | SGLang / experts only | SGLang / grouped "
          "| torch us | torch / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p, steps, distinct, step_bytes, ours, experts_only, grouped, grouped_only, sgl_us, torch_us in rows:
        roofline_us = step_bytes / copy_bw * 1e6
        print(f"| {p['label']} | {p['batch']} | {steps} | {distinct:.1f} | {step_bytes / 1e6:.0f} | {ours:.1f} "
              f"| {100 * roofline_us / ours:.0f}% | {experts_only:.1f} | {grouped:.1f} | {grouped_only:.1f} "
              f"| {sgl_us:.1f} | {sgl_us / experts_only:.2f} | {sgl_us / grouped_only:.2f} "
              f"| {torch_us:.1f} | {torch_us / ours:.2f} |")


if __name__ == "__main__":
    measure.main(build, run, "mixture.py")
