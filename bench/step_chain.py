"""A whole decode step: lanec's plan against the chain of per-op kernels that serves the same
model today, both under CUDA graphs, on the GPU machine.

    python tests/gpu/plans.py                                        # CPU machine: build/plans/
    pip download --no-deps fla-core==0.6.0 einops -d .whl            # CPU machine
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl   # GPU machine
    PYTHONPATH=/tmp/site:. python3 bench/step_chain.py build/plans/*.plan

The chain is built from the plan's own program (its weight names and shapes, batch, tokens a
request and vocabulary), as vLLM runs such a model layer by layer:
- projections and the lm head: torch `F.linear` (cuBLAS), one per weight, gate and up as one;
- norms: fla's fused add + RMSNorm (vLLM's fused_add_rms_norm);
- a KDA layer: fla's `causal_conv1d_update` for q, k and v (one token a request; with q > 1
  tokens a request, fla's `causal_conv1d` over the request's q tokens from its cached taps), the
  f_b and g_b projections, `fused_recurrent_kda_fwd` (L2 norm, Kimi's softplus gate and the beta
  sigmoid in kernel, state written in place at the request's slots; with q > 1 tokens, vLLM's
  speculative form: a [batch, q] slot table and the accepted counts) and `rms_norm_gated`
  (sigmoid);
- a dense MLP: one product over gate and up, fla's `swiglu_fwd`, the down product;
- the token: `torch.argmax` over the logits.

The chain's state holds `batch * q + 1` slots (slot 0 is padding, as in the plan) and every
request is active: request b's slots are 1 + b*q .. (b+1)*q. fla's kernels index the state with
the slot table as it is (no padding test, unlike lanec's kernels, which skip slots <= 0), so the
table and the token ids are checked on the CPU before anything launches (`check_indices`). The
chain is built on the default stream and the device synchronized before its steps run on their
own stream (which does not wait for the default one): a step must never gather with token ids or
slots still being written.

Weights are random (the chain's numbers are not compared: tests/gpu checks lanec's against the
interpreter); both sides read every weight every step, 2 GB against a 60 MB L2, so neither finds
its weights cached. Each figure is the median step of graph replays; ours is `lanec run`'s graph
with PDL (bench/plan_step.py's measurement). Each plan runs in a process of its own: a failure
costs one row, and a failing chain is run again alone and eagerly, each op synchronized, to name
the op that failed (`--locate`)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
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
SEED = 0
HEAD = 128  # KDA's key and value head size (the plan's KdaSplit takes only 128)


def check_indices(tokens: np.ndarray, vocab: int, slots: np.ndarray | None, capacity: int | None,
                  batch: int, q: int, accepted: np.ndarray | None) -> None:
    """What fla's and torch's gathers will read, checked on the CPU: token ids in 0..vocab-1; a
    slot table of [batch] (q = 1) or [batch, q], every slot in 1..capacity-1 (0 and below are
    padding, which fla's recurrent kernel does not skip: it would read and write
    state[-1]) and no slot used twice; accepted counts in 1..q."""
    def refuse(why: str) -> None:
        raise SystemExit(f"step_chain: refusing to launch the chain: {why}")

    if tokens.shape != (batch * q,):
        refuse(f"{list(tokens.shape)} token ids for {batch} requests of {q} tokens")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab):
        refuse(f"token ids span {tokens.min()}..{tokens.max()}; the embedding has {vocab} rows")
    if slots is None:
        return
    want = (batch,) if q == 1 else (batch, q)
    if slots.shape != want:
        refuse(f"the slot table is {list(slots.shape)}; {batch} requests of {q} tokens need {list(want)}")
    flat = slots.reshape(-1)
    if flat.min() < 1 or flat.max() >= capacity:
        bad = int(flat[(flat < 1) | (flat >= capacity)][0])
        refuse(f"slot {bad} in the slot table: fla's kernels would gather state[{bad}], outside its slots "
               f"1..{capacity - 1} (slots <= 0 are padding, which fla's kernels do not skip)")
    if np.unique(flat).size != flat.size:
        refuse("a slot is used twice in the slot table: active requests own distinct slots")
    if q > 1:
        if accepted is None or accepted.shape != (batch,):
            refuse(f"a step of {q} tokens a request needs {batch} accepted counts")
        if accepted.min() < 1 or accepted.max() > q:
            refuse(f"accepted counts span {accepted.min()}..{accepted.max()}: between 1 and {q}")


@dataclass
class Layer:
    weights: dict = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return name in self.weights


class Chain:
    """The per-op chain of a plan's model, with random weights of the program's shapes."""

    def __init__(self, program: Program, locate: bool = False):
        self.batch, self.q = program.batch, program.tokens
        self.rows = self.batch * self.q
        self.locate = locate
        dev = "cuda"
        generator = torch.Generator(device=dev).manual_seed(SEED)
        self.layers: dict[int, Layer] = {}
        self.top: dict[str, torch.Tensor] = {}
        for w in program.weights:
            dtype = torch.float32 if w.dtype == "f32" else torch.bfloat16
            scale = 1.0 if len(w.shape) < 2 else w.shape[-1] ** -0.5
            tensor = (torch.randn(w.shape, device=dev, dtype=torch.float32, generator=generator) * scale).to(dtype)
            if w.name.endswith("norm.weight") or w.name.endswith("layernorm.weight"):
                tensor = torch.ones(w.shape, device=dev, dtype=dtype)
            match = LAYER.fullmatch(w.name)
            if match:
                self.layers.setdefault(int(match.group(1)), Layer()).weights[match.group(2)] = tensor
            else:
                self.top[w.name] = tensor
        self.vocab, self.hidden = self.top["model.embed_tokens.weight"].shape

        # the indices every gather of the step reads, made and checked on the CPU first
        rng = np.random.default_rng(SEED)
        tokens = rng.integers(0, self.vocab, self.rows)
        kda = any(layer.has("self_attn.A_log") for layer in self.layers.values())
        capacity = self.rows + 1 if kda else None
        slots = accepted = None
        if kda:
            slots = np.arange(1, self.rows + 1).reshape((self.batch,) if self.q == 1 else (self.batch, self.q))
            accepted = rng.integers(1, self.q + 1, self.batch) if self.q > 1 else None
        check_indices(tokens, self.vocab, slots, capacity, self.batch, self.q, accepted)
        self.tokens = torch.from_numpy(tokens).to(dev)
        self.slots = torch.from_numpy(slots).to(dev, torch.int32) if slots is not None else None
        self.accepted = torch.from_numpy(accepted).to(dev, torch.int32) if accepted is not None else None

        for layer in self.layers.values():
            w = layer.weights
            if layer.has("self_attn.q_proj.weight"):
                dim = w["self_attn.q_proj.weight"].shape[0]
                heads = w["self_attn.A_log"].shape[0]
                width = w["self_attn.q_conv1d.weight"].shape[1]
                if dim != heads * HEAD:
                    raise SystemExit(f"step_chain: q is {dim} wide for {heads} heads; the chain takes heads "
                                     f"of {HEAD}")
                w["heads"] = heads
                w["state"] = torch.randn(capacity, heads, HEAD, HEAD, device=dev, generator=generator) * 0.1
                # fla's conv keeps a request's taps as [channels, width] (the update shifts them)
                w["caches"] = [torch.randn(self.batch, dim, width, device=dev, dtype=torch.bfloat16,
                                           generator=generator) for _ in range(3)]
            if layer.has("mlp.gate_proj.weight"):
                w["mlp.gate_up"] = torch.cat([w["mlp.gate_proj.weight"], w["mlp.up_proj.weight"]]).contiguous()
        # Everything above was enqueued on the default stream; the step runs (and is captured) on
        # a side stream, which does not wait for it. Without this the first steps gathered rows
        # with token ids and slots not yet written (an out-of-bounds gather, then cuBLAS failing).
        torch.cuda.synchronize()
        if not (np.array_equal(self.tokens.cpu().numpy(), tokens)
                and (slots is None or np.array_equal(self.slots.cpu().numpy(), slots))):
            raise SystemExit("step_chain: the token ids or slots on the GPU are not the ones checked")

    def at(self, what: str) -> None:
        """--locate: wait for the op just enqueued and name it if it failed."""
        if self.locate:
            try:
                torch.cuda.synchronize()
            except Exception as error:  # noqa: BLE001 - the CUDA error, named with its op
                raise SystemExit(f"step_chain: the chain failed at {what}: {error}") from None
            print(f"  ok: {what}", flush=True)

    def conv(self, x: torch.Tensor, cache: torch.Tensor, weight: torch.Tensor, heads: int) -> torch.Tensor:
        from fla.modules.causal_conv1d import causal_conv1d
        from fla.modules.causal_conv1d.ops import causal_conv1d_update

        if self.q == 1:
            y = causal_conv1d_update(x, cache, weight=weight, activation="silu")[0]
        else:  # the request's q tokens from its cached taps; the final taps written as vLLM does
            y, _ = causal_conv1d(x.view(self.batch, self.q, -1), weight=weight, initial_state=cache,
                                 output_final_state=True, activation="silu")
        return y.reshape(self.batch, self.q, heads, HEAD)

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        from fla.modules.activations.ops import swiglu_fwd
        from fla.modules.norm.fused_norm_gate import rms_norm_gated
        from fla.modules.norm.layernorm import rms_norm
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

        batch, q, rows = self.batch, self.q, self.rows
        h = self.top["model.embed_tokens.weight"][self.tokens]
        self.at("embedding gather")
        residual = None
        for index in sorted(self.layers):
            w = self.layers[index].weights
            if "heads" in w:
                heads = w["heads"]
                x, residual = rms_norm(h, w["input_layernorm.weight"], None, residual=residual, eps=EPS,
                                       prenorm=True)
                qkv = [F.linear(x, w[f"self_attn.{p}_proj.weight"]) for p in "qkv"]
                f_a, beta, g_a = (F.linear(x, w[f"self_attn.{p}.weight"]) for p in ("f_a_proj", "b_proj", "g_a_proj"))
                self.at(f"layer {index}: norm and projections")
                q_, k_, v_ = (self.conv(qkv[i], w["caches"][i], w[f"self_attn.{p}_conv1d.weight"], heads)
                              for i, p in enumerate("qkv"))
                g = F.linear(f_a, w["self_attn.f_b_proj.weight"]).reshape(batch, q, heads, HEAD)
                self.at(f"layer {index}: conv and f_b")
                o, _ = fused_recurrent_kda_fwd(
                    q_, k_, v_, g, beta.reshape(batch, q, heads), A_log=w["self_attn.A_log"],
                    dt_bias=w["self_attn.dt_bias"], initial_state=w["state"], inplace_final_state=True,
                    state_v_first=True, ssm_state_indices=self.slots,
                    num_accepted_tokens=self.accepted if q > 1 else None, use_qk_l2norm_in_kernel=True,
                    use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, lower_bound=None)
                self.at(f"layer {index}: recurrent KDA")
                gate = F.linear(g_a, w["self_attn.g_b_proj.weight"])
                o = rms_norm_gated(o.reshape(rows * heads, HEAD), gate.reshape(rows * heads, HEAD),
                                   w["self_attn.o_norm.weight"], None, activation="sigmoid", eps=EPS)
                h = F.linear(o.reshape(rows, heads * HEAD), w["self_attn.o_proj.weight"])
                self.at(f"layer {index}: gated norm and o")
            if "mlp.gate_up" in w:
                norm = w.get("post_attention_layernorm.weight", w.get("input_layernorm.weight"))
                x, residual = rms_norm(h, norm, None, residual=residual, eps=EPS, prenorm=True)
                gate_up = F.linear(x, w["mlp.gate_up"])
                hidden = gate_up.shape[-1] // 2
                h = F.linear(swiglu_fwd(gate_up[:, :hidden], gate_up[:, hidden:]), w["mlp.down_proj.weight"])
                self.at(f"layer {index}: MLP")
        x = rms_norm(h, self.top["model.norm.weight"], None, residual=residual, eps=EPS)
        logits = F.linear(x, self.top["lm_head.weight"])
        chosen = torch.argmax(logits, dim=-1)
        self.at("final norm, lm head and argmax")
        return chosen


def one(path: Path, chain_only: bool, locate: bool) -> None:
    """One plan in this process: `row <batch> <tokens> <launches> <lanec us> <chain us>`."""
    torch.cuda.init()
    plan = Plan.read(path)
    program = Program.from_json(plan.program)
    ours = float("nan") if chain_only else step_us(path, graph=True, pdl=True)
    chain = Chain(program, locate=locate)
    if locate:
        chain.step()
        torch.cuda.synchronize()
        print("step_chain: one eager chain step completed", flush=True)
        return
    theirs = median_graph_us(chain.step, STEPS_A_GRAPH, torch.cuda.Stream())
    print(f"row {program.batch} {program.tokens} {len(plan.launches)} {ours:.2f} {theirs:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="+", type=Path)
    parser.add_argument("--one", action="store_true", help="time the one plan given in this process")
    parser.add_argument("--chain-only", action="store_true", help="with --one: the chain alone, no lanec step")
    parser.add_argument("--locate", action="store_true",
                        help="with --one: one eager chain step, each op synchronized, naming the op that fails")
    options = parser.parse_args()
    if options.one:
        one(options.plans[0], options.chain_only, options.locate)
        return
    print(f"{torch.cuda.get_device_name()}; chain: torch {torch.__version__} (cuBLAS) + fla", flush=True)
    print(f"{'plan':<18} {'batch':>5} {'tokens':>6} {'launches':>8} {'lanec us':>9} {'chain us':>9} "
          f"{'chain / lanec':>13}", flush=True)
    failed = 0
    for path in options.plans:
        command = [sys.executable, __file__, "--one", str(path)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=420)
        rows = [line.split() for line in run.stdout.splitlines() if line.startswith("row ")]
        if run.returncode == 0 and rows:
            batch, tokens, launches, ours, theirs = rows[-1][1:]
            ours, theirs = float(ours), float(theirs)
            print(f"{path.stem:<18} {batch:>5} {tokens:>6} {launches:>8} {ours:>9.2f} {theirs:>9.2f} "
                  f"{theirs / ours:>12.2f}x", flush=True)
            continue
        failed += 1
        tail = "\n    ".join((run.stdout + run.stderr).strip().splitlines()[-12:])
        print(f"{path.stem:<18} FAILED (exit {run.returncode}):\n    {tail}", flush=True)
        # the chain again, alone and eagerly, each op synchronized: which op failed
        environment = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
        locate = subprocess.run([*command, "--chain-only", "--locate"], capture_output=True, text=True,
                                timeout=420, env=environment)
        tail = "\n    ".join((locate.stdout + locate.stderr).strip().splitlines()[-12:])
        print(f"  {path.stem}: the chain alone, eagerly (exit {locate.returncode}):\n    {tail}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
