"""The expanded latent attention (`latent_expand`, then `expanded_attention`, and the combine where
the lane splits the keys) against torch's expanded MLA (the cached latents through kv_b by
matmul, SDPA over the per-head keys and values), both under CUDA graphs, with the copy bandwidth
and the bf16 tensor peak measured in the same run. Two steps:

    python bench/latent_expanded.py build          # CPU machine: compile into build/bench-expanded/
    PYTHONPATH=. python3 bench/latent_expanded.py  # GPU machine (carry build/bench-expanded)

Shapes: Kimi Linear's MLA (32 heads, nope 128, rope 64, lora 512, v 128) and DeepSeek-V3's
16-head shard (the same per-head sizes), contexts 512 and 4096, batch 1 and 8, one token a
request at the context's last position. The lane takes this path only where a held-back rule
refuses the absorbed one; these shapes keep the absorbed path's sizes so the costs compare.
"expand TFLOP/s": the expansion's 2 x context x heads x lora x (nope + v) a request over our time."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import measure  # bench/measure.py: this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench-expanded"
SHAPES = [("kimi-linear mla", 32), ("deepseek-v3 16-head shard", 16)]
NOPE, ROPE, LORA, V, PAGE = 128, 64, 512, 128, 64
CONTEXTS, BATCHES = [512, 4096], [1, 8]


def problems() -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from lanec.shim import attention_splits

    found = []
    for label, heads in SHAPES:
        for context in CONTEXTS:
            for batch in BATCHES:
                max_pages = context // PAGE
                shape = dict(batch=batch, tokens=1, heads=heads, nope=NOPE, rope=ROPE, v=V, page_size=PAGE,
                             max_pages=max_pages, cache_pages=batch * max_pages)
                splits = attention_splits(batch, heads, heads, context, expanded=True)
                found.append(dict(label=label, context=context, shape=shape, splits=splits,
                                  stem=f"h{heads}_c{context}_b{batch}"))
    return found


def build() -> None:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels.attention import AttentionCombine
    from lanec.codegen.kernels.latent_expanded import ExpandedLatentAttention, LatentExpand

    listing = problems()
    for p in listing:
        shape, splits = p["shape"], p["splits"]
        compile_kernel(LatentExpand(**shape, lora=LORA)).save(OUT, f"expand_{p['stem']}")
        compile_kernel(ExpandedLatentAttention(**shape, splits=splits)).save(OUT, f"attend_{p['stem']}")
        if splits > 1:
            combine = AttentionCombine(shape["batch"], shape["heads"], V, splits)
            compile_kernel(combine).save(OUT, f"combine_{p['stem']}")
        print(f"built {p['stem']} (splits {splits})", flush=True)
    (OUT / "manifest.json").write_text(json.dumps(listing, indent=1) + "\n")


def torch_expanded(torch, latents, kv_b, query, out):
    """torch's expanded MLA of requests whose cached rows are `latents` [batch, context, lora +
    rope]: keys [W_k,h c, k_rope] and values W_v,h c by einsum, SDPA of `query` [batch, heads, 1,
    nope + rope] over them into `out`: the anchor, as a function of no arguments."""
    batch, context, _ = latents.shape
    heads = query.shape[1]
    expand = kv_b.view(heads, NOPE + V, LORA)
    w_key, w_value = expand[:, :NOPE], expand[:, NOPE:]

    def attend() -> None:
        c, k_rope = latents[..., :LORA], latents[..., LORA:]
        keys = torch.einsum("bnl,hdl->bhnd", c, w_key)
        keys = torch.cat([keys, k_rope[:, None].expand(batch, heads, context, ROPE)], dim=-1)
        values = torch.einsum("bnl,hvl->bhnv", c, w_value)
        out.copy_(torch.nn.functional.scaled_dot_product_attention(query, keys, values).reshape(batch, heads * V))

    return attend


def run() -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    from lanec.codegen.facts import ExpandedLatentSpec
    from lanec.runtime import driver

    device = driver.Device(0)
    torch.cuda.init()
    torch_stream, ours_stream = torch.cuda.Stream(), driver.Stream()
    copy_bw, peak = measure.ceilings(torch, torch_stream, device.name)
    kernels = measure.Kernels(driver, OUT, ours_stream)
    results = []
    for p in json.loads((OUT / "manifest.json").read_text()):
        s, context, splits = p["shape"], p["context"], p["splits"]
        batch, heads, max_pages = s["batch"], s["heads"], s["max_pages"]
        key_width = ExpandedLatentSpec(**s).key_width
        bf16 = dict(dtype=torch.bfloat16, device="cuda")
        cache = torch.randn(batch * max_pages, PAGE, LORA + ROPE, **bf16)
        kv_b = torch.randn(heads * (NOPE + V), LORA, **bf16) * LORA ** -0.5
        w = kv_b.view(heads, NOPE + V, LORA).transpose(1, 2).reshape(heads * LORA, NOPE + V).contiguous()
        tensors = {
            "latent": torch.randn(batch, LORA, **bf16), "k_rope": torch.randn(batch, ROPE, **bf16),
            "positions": torch.full((batch,), context - 1, dtype=torch.int32, device="cuda"),
            "pages": torch.arange(batch * max_pages, dtype=torch.int32, device="cuda").view(batch, max_pages),
            "w": w, "cache": cache, "q": torch.randn(batch, heads * (NOPE + ROPE), **bf16),
            "keys": torch.empty(batch * max_pages, PAGE, heads, key_width, **bf16),
            "values": torch.empty(batch * max_pages, PAGE, heads, V, **bf16),
            "out": torch.empty(batch, heads * V, **bf16),
            "partial": torch.empty(splits, batch, heads, V, dtype=torch.float32, device="cuda"),
            "lse": torch.empty(splits, batch, heads, dtype=torch.float32, device="cuda")}
        launches = [kernels.launch(f"expand_{p['stem']}", tensors), kernels.launch(f"attend_{p['stem']}", tensors)]
        if splits > 1:
            launches.append(kernels.launch(f"combine_{p['stem']}", tensors))
        ours = measure.graph_us(driver, ours_stream, launches)

        expanded = torch_expanded(torch, cache.view(batch, context, LORA + ROPE), kv_b,
                                  tensors["q"].view(batch, heads, 1, NOPE + ROPE), tensors["out"])
        anchor = measure.torch_graph_us(torch, torch_stream, expanded)
        flops = 2 * batch * context * heads * LORA * (NOPE + V)
        results.append((p, ours, anchor, flops))
        print(f"  {p['label']} ctx {context} b{batch}: ours {ours:.1f} us  torch {anchor:.1f} us", flush=True)
    print(f"\nGPU: {device.name}; copy {copy_bw / 1e12:.2f} TB/s; bf16 tensor peak {peak / 1e12:.0f} TFLOP/s")
    print("| shape | context | batch | splits | ours us | expand TFLOP/s | % of tensor peak | torch expanded us "
          "| torch / ours |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p, ours, anchor, flops in results:
        rate = flops / (ours * 1e-6)
        print(f"| {p['label']} | {p['context']} | {p['shape']['batch']} | {p['splits']} | {ours:.1f} "
              f"| {rate / 1e12:.1f} | {100 * rate / peak:.1f}% | {anchor:.1f} | {anchor / ours:.2f} |")


if __name__ == "__main__":
    measure.main(build, run, "latent_expanded.py")
