"""A whole decode step: lanec's plan against the chain of per-op kernels that serves the same
model today, both under CUDA graphs, in one run on the GPU machine.

    python tests/gpu/plans.py                                        # CPU machine: build/plans/
    pip download --no-deps fla-core==0.6.0 einops -d .whl            # CPU machine
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl   # GPU machine
    PYTHONPATH=/tmp/site:. python3 bench/step_chain.py build/plans/kimi-kda-b1.plan ...

The chain is built from the plan's own program (its weight names and shapes, batch and
vocabulary), as vLLM runs such a model layer by layer:
- projections and the lm head: torch `F.linear` (cuBLAS), one per weight, gate and up as one;
- norms: fla's fused add + RMSNorm (vLLM's fused_add_rms_norm);
- a KDA layer: fla's `causal_conv1d_update` for q, k and v, the f_b and g_b projections,
  `fused_recurrent_kda_fwd` (L2 norm, Kimi's softplus gate and the beta sigmoid in kernel, state
  written in place at the request's slot) and `rms_norm_gated` (sigmoid);
- a dense MLP: one product over gate and up, fla's `swiglu_fwd`, the down product;
- the token: `torch.argmax` over the logits.
Weights are random (the chain's numbers are not compared: tests/gpu checks lanec's against the
interpreter); both sides read every weight every step, 2 GB against a 60 MB L2, so neither finds
its weights cached. Each figure is the median step of graph replays; ours is `lanec run`'s graph
with PDL (bench/plan_step.py's measurement)."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from kda import median_graph_us  # noqa: E402
from plan_step import step_us  # noqa: E402

from lanec.interp.program import Program  # noqa: E402
from lanec.runtime.plan import Plan  # noqa: E402

LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
EPS = 1e-5
STEPS_A_GRAPH = 4


@dataclass
class Layer:
    weights: dict[str, torch.Tensor] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return name in self.weights


class Chain:
    """The per-op chain of a plan's model, with random weights of the program's shapes."""

    def __init__(self, program: Program):
        self.batch = program.batch
        if program.tokens != 1:
            raise SystemExit("bench/step_chain.py times one token a request (no speculative plans)")
        dev = "cuda"
        self.layers: dict[int, Layer] = {}
        self.top: dict[str, torch.Tensor] = {}
        for w in program.weights:
            dtype = torch.float32 if w.dtype == "f32" else torch.bfloat16
            scale = 1.0 if len(w.shape) < 2 else w.shape[-1] ** -0.5
            tensor = (torch.randn(w.shape, device=dev, dtype=torch.float32) * scale).to(dtype)
            if w.name.endswith("norm.weight") or w.name.endswith("layernorm.weight"):
                tensor = torch.ones(w.shape, device=dev, dtype=dtype)
            match = LAYER.fullmatch(w.name)
            if match:
                self.layers.setdefault(int(match.group(1)), Layer()).weights[match.group(2)] = tensor
            else:
                self.top[w.name] = tensor
        self.vocab, self.hidden = self.top["model.embed_tokens.weight"].shape
        self.tokens = torch.randint(0, self.vocab, (self.batch,), device=dev)
        self.slots = torch.arange(1, self.batch + 1, device=dev, dtype=torch.int32)
        for layer in self.layers.values():
            w = layer.weights
            if layer.has("self_attn.q_proj.weight"):
                dim = w["self_attn.q_proj.weight"].shape[0]
                heads = w["self_attn.A_log"].shape[0]
                width = w["self_attn.q_conv1d.weight"].shape[1]
                w["heads"] = heads
                w["state"] = torch.randn(self.batch + 1, heads, 128, 128, device=dev) * 0.1
                w["caches"] = [torch.randn(self.batch, dim, width, device=dev, dtype=torch.bfloat16)
                               for _ in range(3)]
            if layer.has("mlp.gate_proj.weight"):
                w["mlp.gate_up"] = torch.cat([w["mlp.gate_proj.weight"], w["mlp.up_proj.weight"]]).contiguous()

    def step(self) -> torch.Tensor:
        from fla.modules.activations.ops import swiglu_fwd
        from fla.modules.causal_conv1d.ops import causal_conv1d_update
        from fla.modules.norm.fused_norm_gate import rms_norm_gated
        from fla.modules.norm.layernorm import rms_norm
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

        batch = self.batch
        h = self.top["model.embed_tokens.weight"][self.tokens]
        residual = None
        for index in sorted(self.layers):
            w = self.layers[index].weights
            if "heads" in w:
                heads = w["heads"]
                x, residual = rms_norm(h, w["input_layernorm.weight"], None, residual=residual, eps=EPS,
                                       prenorm=True)
                qkv = [F.linear(x, w[f"self_attn.{p}_proj.weight"]) for p in "qkv"]
                f_a, beta, g_a = (F.linear(x, w[f"self_attn.{p}.weight"]) for p in ("f_a_proj", "b_proj", "g_a_proj"))
                q, k, v = (causal_conv1d_update(qkv[i], w["caches"][i], weight=w[f"self_attn.{p}_conv1d.weight"],
                                                activation="silu")[0].reshape(batch, 1, heads, 128)
                           for i, p in enumerate("qkv"))
                g = F.linear(f_a, w["self_attn.f_b_proj.weight"]).reshape(batch, 1, heads, 128)
                o, _ = fused_recurrent_kda_fwd(
                    q, k, v, g, beta.reshape(batch, 1, heads), A_log=w["self_attn.A_log"],
                    dt_bias=w["self_attn.dt_bias"], initial_state=w["state"], inplace_final_state=True,
                    state_v_first=True, ssm_state_indices=self.slots, use_qk_l2norm_in_kernel=True,
                    use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, lower_bound=None)
                gate = F.linear(g_a, w["self_attn.g_b_proj.weight"])
                o = rms_norm_gated(o.reshape(batch * heads, 128), gate.reshape(batch * heads, 128),
                                   w["self_attn.o_norm.weight"], None, activation="sigmoid", eps=EPS)
                h = F.linear(o.reshape(batch, heads * 128), w["self_attn.o_proj.weight"])
            if "mlp.gate_up" in w:
                norm = w.get("post_attention_layernorm.weight", w.get("input_layernorm.weight"))
                x, residual = rms_norm(h, norm, None, residual=residual, eps=EPS, prenorm=True)
                gate_up = F.linear(x, w["mlp.gate_up"])
                hidden = gate_up.shape[-1] // 2
                h = F.linear(swiglu_fwd(gate_up[:, :hidden], gate_up[:, hidden:]), w["mlp.down_proj.weight"])
        x = rms_norm(h, self.top["model.norm.weight"], None, residual=residual, eps=EPS)
        logits = F.linear(x, self.top["lm_head.weight"])
        return torch.argmax(logits, dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="+", type=Path)
    options = parser.parse_args()
    torch.cuda.init()
    print(f"{torch.cuda.get_device_name()}; chain: torch {torch.__version__} (cuBLAS) + fla", flush=True)
    print(f"{'plan':<22} {'batch':>5} {'launches':>8} {'lanec us':>9} {'chain us':>9} {'chain / lanec':>13}",
          flush=True)
    for path in options.plans:
        plan = Plan.read(path)
        program = Program.from_json(plan.program)
        if program.tokens != 1:
            print(f"{path.stem:<22} skipped: {program.tokens} tokens a request (the chain times one)")
            continue
        ours = step_us(path, graph=True, pdl=True)
        chain = Chain(program)
        theirs = median_graph_us(chain.step, STEPS_A_GRAPH, torch.cuda.Stream())
        del chain
        torch.cuda.empty_cache()
        print(f"{path.stem:<22} {program.batch:>5} {len(plan.launches):>8} {ours:>9.2f} {theirs:>9.2f} "
              f"{theirs / ours:>12.2f}x", flush=True)


if __name__ == "__main__":
    main()
