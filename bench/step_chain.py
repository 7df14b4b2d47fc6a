"""A whole decode step: lanec's plan against the chain of per-op kernels that serves the same
model today, both under CUDA graphs, on the GPU machine.

    python tests/gpu/plans.py                                        # CPU machine: build/plans/
    pip download --no-deps fla-core==0.6.0 einops -d .whl            # CPU machine
    python .anchors/make_vendor.py                                   # CPU machine, for MLA and MoE layers
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl   # GPU machine
    PYTHONPATH=/tmp/site:. python3 bench/step_chain.py build/plans/*.plan

The chain is built from the plan's own program (its layers, weight shapes, batch, tokens a
request and vocabulary), as vLLM and SGLang run such a model layer by layer:
- projections and the lm head: torch `F.linear` (cuBLAS), one per weight, gate and up as one;
- norms: fla's fused add + RMSNorm (vLLM's fused_add_rms_norm);
- a KDA layer: fla's `causal_conv1d_update` for q, k and v (one token a request; with q > 1
  tokens a request, fla's `causal_conv1d` over the request's q tokens from its cached taps), the
  f_b and g_b projections, `fused_recurrent_kda_fwd` (L2 norm, Kimi's softplus gate and the beta
  sigmoid in kernel, state written in place at the request's slots; with q > 1 tokens, vLLM's
  speculative form: a [batch, q] slot table and the accepted counts) and `rms_norm_gated`
  (sigmoid);
- an MLA layer, absorbed as SGLang serves DeepSeek and Kimi decode (`forward_absorb`): the q
  product and the kv_a product (the latent and its shared key part, one weight), the latent's
  norm, q's nope part times w_kc per head (`torch.bmm`), the step's latent rows written into a
  page-size-1 pool ([rows, 1, lora + rope], a request's rows contiguous), SGLang's Triton
  `decode_attention_fwd` with `has_mla` over it (its split heuristic run before the graph, as
  the backend runs it before each replay; one sequence a row, a speculative row seeing its
  request's rows up to its own), the result times w_vc per head (`torch.bmm`), the o product;
- a mixture: the router in torch (the scores, their sigmoid, the correction bias for choosing,
  top-k, the chosen scores renormalised), SGLang's alignment (its Triton small-numel kernel up
  to 64 (row, expert) pairs, bench/align_moe.py above), SGLang's Triton fused MoE over the
  stacked experts (up GEMM, SiLU x up, down GEMM weighted by the routing, the top-k sum scaled
  by the routed scaling factor) as the anchors probe calls it (`MoeCase`), and the shared
  expert as a dense MLP added to it;
- a dense MLP: one product over gate and up, fla's `swiglu_fwd`, the down product;
- the token: `torch.argmax` over the logits.
MLA and mixture layers need SGLang's kernels from `.anchors/vendor` (bench/measure.py's
`load_anchors`).

Inputs are runner.served_inputs' (a full batch at a context: every request active, request b's
slots 1 + b*q .. (b+1)*q; slot 0 is padding, as in the plan). fla's kernels index the state with
the slot table as it is (no padding test, unlike lanec's kernels, which skip slots <= 0), so the
table and the token ids are checked on the CPU before anything launches (`check_indices`). The
chain is built on the default stream and the device synchronized before its steps run on their
own stream (which does not wait for the default one): a step must never gather with token ids or
slots still being written.

Weights are random, drawn on the GPU (the chain's numbers are not compared: tests/gpu checks
lanec's against the interpreter); both sides read every weight every step, 2 GB against a 60 MB
L2, so neither finds its weights cached. Each figure is the median step of graph replays; ours is
`lanec run`'s graph with PDL (bench/plan_step.py's measurement). Each plan runs in a process of
its own: a failure costs one row, and a failing chain is run again alone and eagerly, each op
synchronized, to name the op that failed (`--locate`). bench/model.py runs the whole model at
its real size with the same chain.

The chain's time moves between runs (the KDA-only batch-64 chain has read 625-706 us while
lanec's step stayed within 1%), so `--rounds N` runs every plan N times, the plans interleaved
(round 1 of each, then round 2, ...), and ends with each plan's median lanec and chain times, the
ratio of the medians and the range of the rounds' ratios."""

from __future__ import annotations

import argparse
import math
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
from lanec.runtime.runner import served_inputs  # noqa: E402

LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
EPS = 1e-5
STEPS_A_GRAPH = 4
SEED = 0
HEAD = 128  # KDA's key and value head size (the plan's KdaSplit takes only 128)
CORRECTION = 0.1  # the router's correction bias's scale, as the seeded weights draw it
MIXERS = {"kda": "kda", "latent_attention": "mla"}
MLPS = {"mixture": "mixture", "gated_product": "dense", "swiglu": "dense"}


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
class LayerPlan:
    """One layer of the chain: its token mixer ("kda" or "mla") and MLP ("dense" or "mixture"),
    with the properties of the program's steps that make them."""

    index: int
    mixer: str = ""
    mlp: str = ""
    mixer_props: dict = field(default_factory=dict)
    mlp_props: dict = field(default_factory=dict)


def layer_plans(program: Program) -> dict[int, LayerPlan]:
    """The program's layers, each found by the weights its steps read (model.layers.N....); a
    layer the chain does not serve (another mixer, no MLP) stops here in one line."""
    names = {w.value: w.name for w in program.weights}

    def layer_of(step) -> int | None:
        for ids in step.operands.values():
            for value in ids if isinstance(ids, list) else [ids]:
                match = LAYER.fullmatch(names.get(value, ""))
                if match:
                    return int(match.group(1))
        return None

    plans: dict[int, LayerPlan] = {}
    for step in program.steps:
        index = layer_of(step)
        if index is None:
            continue
        plan = plans.setdefault(index, LayerPlan(index))
        if step.op in MIXERS:
            plan.mixer = MIXERS[step.op]
            plan.mixer_props.update(step.properties)
        elif step.op in MLPS and not plan.mlp:
            plan.mlp, plan.mlp_props = MLPS[step.op], dict(step.properties)
        elif step.op == "norm" and names.get(step.operands["w"], "").endswith("kv_a_layernorm.weight"):
            plan.mixer_props["latent_eps"] = step.properties["eps"]
        elif step.op not in ("norm", "product"):
            raise SystemExit(f"step_chain: layer {index} runs {step.op!r}; the chain serves KDA and MLA layers "
                             "with a dense MLP or a mixture")
    for plan in plans.values():
        if not plan.mixer or not plan.mlp:
            raise SystemExit(f"step_chain: layer {plan.index} has {plan.mixer or 'no token mixer'} and "
                             f"{plan.mlp or 'no MLP'}; the chain serves layers with both")
        if plan.mlp_props.get("groups"):
            raise SystemExit(f"step_chain: layer {plan.index}'s mixture chooses grouped top-k; the chain's router "
                             "takes one group")
    return dict(sorted(plans.items()))


@dataclass(frozen=True)
class Spec:
    """One tensor of the chain: its shape and dtype, drawn normal of `scale` (or all ones)."""

    shape: tuple[int, ...]
    dtype: str = "bf16"  # or "f32"
    scale: float = 1.0
    ones: bool = False

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * (4 if self.dtype == "f32" else 2)


def fan_in(shape) -> Spec:
    return Spec(tuple(shape), scale=shape[-1] ** -0.5)


def chain_tensors(program: Program, context: int | None = None) -> dict[str, Spec]:
    """Every tensor the chain holds, by name ("top.embed", "3.w13", ...): the weights in the chain's
    own layouts (gate and up stacked as one product, the experts' gate and up as SGLang's w13, kv_b
    split into w_kc and w_vc per head, kv_a's two parts as one product), the KDA states and conv
    taps of a full batch, and each MLA layer's latent pool of `context` rows a request."""
    shapes = {w.name: tuple(w.shape) for w in program.weights}
    batch, rows = program.batch, program.rows
    hidden = shapes["model.embed_tokens.weight"][1]
    tensors = {"top.embed": Spec(shapes["model.embed_tokens.weight"]), "top.norm": Spec((hidden,), ones=True),
               "top.lm_head": fan_in(shapes.get("lm_head.weight", shapes["model.embed_tokens.weight"]))}
    for index, plan in layer_plans(program).items():
        p, at = f"model.layers.{index}.", f"{index}."

        def weight(name: str, p: str = p) -> tuple[int, ...]:
            return shapes[p + name]

        tensors[at + "input_norm"] = tensors[at + "post_norm"] = Spec((hidden,), ones=True)
        a = "self_attn."
        if plan.mixer == "kda":
            for name in ("q_proj", "k_proj", "v_proj", "f_a_proj", "b_proj", "g_a_proj", "f_b_proj", "g_b_proj",
                         "o_proj", "q_conv1d", "k_conv1d", "v_conv1d"):
                tensors[at + name] = fan_in(weight(f"{a}{name}.weight"))
            heads = plan.mixer_props["heads"]
            dim, width = weight(f"{a}q_conv1d.weight")
            if dim != heads * HEAD:
                raise SystemExit(f"step_chain: q is {dim} wide for {heads} heads; the chain takes heads of {HEAD}")
            tensors[at + "A_log"] = Spec(weight(f"{a}A_log"), "f32")
            tensors[at + "dt_bias"] = Spec(weight(f"{a}dt_bias"), "f32")
            tensors[at + "o_norm"] = Spec(weight(f"{a}o_norm.weight"), ones=True)
            tensors[at + "state"] = Spec((rows + 1, heads, HEAD, HEAD), "f32", 0.1)
            for name in ("q_taps", "k_taps", "v_taps"):  # fla keeps a request's taps as [channels, width]
                tensors[at + name] = Spec((batch, dim, width))
        else:
            props = plan.mixer_props
            heads, nope, rope, lora, v = (props[k] for k in ("heads", "nope", "rope", "lora", "v"))
            kv_a = f"{a}kv_a_proj_with_mqa.weight"
            tensors[at + "q_proj"] = fan_in(weight(f"{a}q_proj.weight"))
            tensors[at + "kv_a"] = Spec((weight(f"{kv_a}[0:{lora}]")[0] + weight(f"{kv_a}[{lora}:{lora + rope}]")[0],
                                         hidden), scale=hidden ** -0.5)
            tensors[at + "kv_a_norm"] = Spec((lora,), ones=True)
            tensors[at + "w_kc"] = Spec((heads, nope, lora), scale=nope ** -0.5)
            tensors[at + "w_vc"] = Spec((heads, lora, v), scale=lora ** -0.5)
            tensors[at + "o_proj"] = fan_in(weight(f"{a}o_proj.weight"))
            if context is None:
                raise SystemExit("step_chain: an MLA layer's pool needs the context its requests hold")
            tensors[at + "pool"] = Spec((batch * context, 1, lora + rope))
        if plan.mlp == "dense":
            gate = weight("mlp.gate_proj.weight")
            tensors[at + "gate_up"] = fan_in((2 * gate[0], gate[1]))
            tensors[at + "down"] = fan_in(weight("mlp.down_proj.weight"))
        else:
            m = "block_sparse_moe."
            experts, units, _ = weight(f"{m}experts.*.w1.weight")
            tensors[at + "router"] = fan_in(weight(f"{m}gate.weight"))
            tensors[at + "correction"] = Spec((experts,), "f32", CORRECTION)
            tensors[at + "w13"] = Spec((experts, 2 * units, hidden), scale=hidden ** -0.5)
            tensors[at + "w2"] = Spec((experts, hidden, units), scale=units ** -0.5)
            if p + f"{m}shared_experts.gate_proj.weight" in shapes:
                shared = weight(f"{m}shared_experts.gate_proj.weight")
                tensors[at + "shared_gate_up"] = fan_in((2 * shared[0], shared[1]))
                tensors[at + "shared_down"] = fan_in(weight(f"{m}shared_experts.down_proj.weight"))
    return tensors


def latent_rows(batch: int, q: int, context: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The MLA pool's rows as SGLang's decode attention reads them, one sequence a step row: request
    b holds pool rows b * context ..; its row t (of q) is at position context - q + t and sees the
    request's rows up to it. (kv_indptr int32 [rows + 1], kv_indices int64, the rows each step row
    writes int64 [rows], each sequence's length int64 [rows])."""
    lengths = np.tile(context - q + 1 + np.arange(q), batch)
    starts = np.repeat(np.arange(batch) * context, q)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = np.concatenate([start + np.arange(n) for start, n in zip(starts, lengths)]).astype(np.int64)
    return indptr, indices, (starts + lengths - 1).astype(np.int64), lengths.astype(np.int64)


class Chain:
    """The per-op chain of a plan's model, with random weights of the program's shapes, serving
    `inputs` (runner.served_inputs') at `context` positions a request (MLA layers only)."""

    def __init__(self, program: Program, inputs: dict[str, np.ndarray], context: int | None = None,
                 locate: bool = False, anchors=None):
        self.batch, self.q = program.batch, program.tokens
        self.rows = self.batch * self.q
        self.locate = locate
        self.plans = layer_plans(program)
        self.anchors = anchors
        if anchors is None and any(p.mixer == "mla" or p.mlp == "mixture" for p in self.plans.values()):
            raise SystemExit("step_chain: the chain's MLA and mixture layers run SGLang's kernels: .anchors/vendor is "
                             "missing (python .anchors/make_vendor.py, then carry .anchors)")
        specs = chain_tensors(program, context)
        self.max_splits = anchors.mla_max_kv_splits(torch.cuda.get_device_properties(0).multi_processor_count) \
            if anchors is not None else 0
        self.refuse_beyond_memory(specs, program)
        dev = "cuda"
        generator = torch.Generator(device=dev).manual_seed(SEED)
        self.tensors: dict[str, torch.Tensor] = {}
        for name, spec in specs.items():
            dtype = torch.float32 if spec.dtype == "f32" else torch.bfloat16
            if spec.ones:
                self.tensors[name] = torch.ones(spec.shape, device=dev, dtype=dtype)
            else:
                self.tensors[name] = torch.empty(spec.shape, device=dev, dtype=dtype).normal_(
                    0.0, spec.scale, generator=generator)
        self.vocab, self.hidden = specs["top.embed"].shape

        # the indices every gather of the step reads, checked on the CPU first
        tokens = inputs["tokens"].astype(np.int64)
        kda = any(p.mixer == "kda" for p in self.plans.values())
        slots = None
        if kda:  # [batch] for one token a request, else [batch, q]: the tokens' own slots
            slots = inputs["slots"].astype(np.int64).reshape(self.batch, -1)[:, : self.q]
            slots = slots.reshape(self.batch) if self.q == 1 else slots
        accepted = inputs["accepted"].astype(np.int64) if kda and self.q > 1 else None
        check_indices(tokens, self.vocab, slots, self.rows + 1 if kda else None, self.batch, self.q, accepted)
        self.tokens = torch.from_numpy(tokens).to(dev)
        self.slots = torch.from_numpy(slots).to(dev, torch.int32) if slots is not None else None
        self.accepted = torch.from_numpy(accepted).to(dev, torch.int32) if accepted is not None else None
        if any(p.mixer == "mla" for p in self.plans.values()):
            self.prepare_latent(context)
        if any(p.mlp == "mixture" for p in self.plans.values()):
            self.prepare_mixture()
        # Everything above was enqueued on the default stream; the step runs (and is captured) on
        # a side stream, which does not wait for it. Without this the first steps gathered rows
        # with token ids and slots not yet written (an out-of-bounds gather, then cuBLAS failing).
        torch.cuda.synchronize()
        if not (np.array_equal(self.tokens.cpu().numpy(), tokens)
                and (slots is None or np.array_equal(self.slots.cpu().numpy(), slots))):
            raise SystemExit("step_chain: the token ids or slots on the GPU are not the ones checked")

    def layer(self, index: int, name: str) -> torch.Tensor:
        return self.tensors[f"{index}.{name}"]

    def refuse_beyond_memory(self, specs: dict[str, Spec], program: Program) -> None:
        """One line, before anything is drawn, where the chain's tensors (and the MLA layers'
        split scratch) do not fit in the free GPU memory."""
        needed = sum(spec.nbytes for spec in specs.values())
        mla = [p.mixer_props for p in self.plans.values() if p.mixer == "mla"]
        if mla:
            needed += self.rows * mla[0]["heads"] * self.max_splits * (mla[0]["lora"] + 1) * 4
        free, _ = torch.cuda.mem_get_info()
        if needed > free:
            raise SystemExit(f"step_chain: the chain needs {needed / 2**30:.1f} GiB for its weights, states and "
                             f"caches; {free / 2**30:.1f} GiB of GPU memory are free")

    def prepare_latent(self, context: int) -> None:
        """The MLA layers' shared pieces: which pool rows each step row reads and writes, SGLang's
        split count a sequence (its heuristic kernel, run once here as the backend runs it before a
        graph replay), the split scratch and the attention's output."""
        a = self.anchors
        props = next(p.mixer_props for p in self.plans.values() if p.mixer == "mla")
        heads, lora, rope = props["heads"], props["lora"], props["rope"]
        indptr, indices, writes, lengths = latent_rows(self.batch, self.q, context)
        dev = "cuda"
        self.kv_indptr = torch.from_numpy(indptr).to(dev)
        self.kv_indices = torch.from_numpy(indices).to(dev)
        self.latent_writes = torch.from_numpy(writes).to(dev)
        self.uneven_batch = torch.zeros(1, dtype=torch.int32, device=dev)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        self.num_kv_splits = a.serving_num_kv_splits(torch.from_numpy(lengths).to(dev), heads, 1, self.max_splits,
                                                     sms, self.uneven_batch)
        self.attn_logits = torch.empty(self.rows, heads, self.max_splits, lora, dtype=torch.float32, device=dev)
        self.attn_lse = torch.empty(self.rows, heads, self.max_splits, dtype=torch.float32, device=dev)
        self.latent_out = torch.empty(self.rows, heads, lora, dtype=torch.bfloat16, device=dev)
        self.use_pdl = a.is_arch_support_pdl()
        self.latent_width = lora + rope

    def prepare_mixture(self) -> None:
        """The mixture layers' shared pieces: the routing buffers the router writes and the fused
        MoE reads, SGLang's config and align buffers for this batch (the anchors' `MoeCase`, one
        for every layer: each layer's x and experts are set before its launches), and our align
        kernel checked against the anchors' torch alignment where the batch needs it."""
        a = self.anchors
        first = next(p for p in self.plans.values() if p.mlp == "mixture")
        top_k = first.mlp_props["top_k"]
        w13, w2 = self.layer(first.index, "w13"), self.layer(first.index, "w2")
        self.experts = w13.shape[0]
        dev = "cuda"
        self.routing_ids = torch.arange(top_k, dtype=torch.int32, device=dev).repeat(self.rows, 1)
        self.routing_weights = torch.full((self.rows, top_k), 1.0 / top_k, dtype=torch.float32, device=dev)
        x = torch.zeros(self.rows, self.hidden, dtype=torch.bfloat16, device=dev)
        self.moe = a.MoeCase(x=x, w1=w13, w2=w2, topk=top_k, draws=[(self.routing_weights, self.routing_ids)])
        self.block = self.moe.config["BLOCK_SIZE_M"]
        self.small_align = self.rows * top_k <= a.SMALL_NUMEL_LIMIT
        if not self.small_align:
            import align_moe

            self.align_cursor = torch.zeros(align_moe.buckets_needed(self.experts + 1), dtype=torch.int32, device=dev)
            drawn = torch.rand(self.rows, self.experts, device=dev).topk(top_k, dim=-1).indices.to(torch.int32)
            self.routing_ids.copy_(drawn)
            self.align()
            want = a.moe_align_block_size_torch(drawn, self.block, self.experts)
            if not a.same_alignment(self.moe.aligned[0], want, drawn.numel(), self.block):
                raise SystemExit("step_chain: bench/align_moe.py's alignment differs from the anchors' torch alignment "
                                 f"({self.rows} rows, top {top_k}, block {self.block})")

    def align(self) -> None:
        """SGLang's alignment of the routing into the fused MoE's buffers, on the step's stream."""
        buffers = self.moe.aligned[0]
        if self.small_align:
            self.anchors.moe_align_small_numel(self.routing_ids, self.experts + 1, self.block, *buffers)
        else:
            import align_moe

            align_moe.align(self.routing_ids, self.experts + 1, self.block, *buffers, self.align_cursor)

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

    def kda(self, index: int, x: torch.Tensor) -> torch.Tensor:
        from fla.modules.norm.fused_norm_gate import rms_norm_gated
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

        batch, q, rows = self.batch, self.q, self.rows
        w = lambda name: self.layer(index, name)  # noqa: E731
        heads = self.plans[index].mixer_props["heads"]
        qkv = [F.linear(x, w(f"{p}_proj")) for p in "qkv"]
        f_a, beta, g_a = (F.linear(x, w(p)) for p in ("f_a_proj", "b_proj", "g_a_proj"))
        self.at(f"layer {index}: KDA projections")
        q_, k_, v_ = (self.conv(qkv[i], w(f"{p}_taps"), w(f"{p}_conv1d"), heads) for i, p in enumerate("qkv"))
        g = F.linear(f_a, w("f_b_proj")).reshape(batch, q, heads, HEAD)
        self.at(f"layer {index}: conv and f_b")
        o, _ = fused_recurrent_kda_fwd(
            q_, k_, v_, g, beta.reshape(batch, q, heads), A_log=w("A_log"), dt_bias=w("dt_bias"),
            initial_state=w("state"), inplace_final_state=True, state_v_first=True, ssm_state_indices=self.slots,
            num_accepted_tokens=self.accepted if q > 1 else None, use_qk_l2norm_in_kernel=True,
            use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, lower_bound=None)
        self.at(f"layer {index}: recurrent KDA")
        gate = F.linear(g_a, w("g_b_proj"))
        o = rms_norm_gated(o.reshape(rows * heads, HEAD), gate.reshape(rows * heads, HEAD), w("o_norm"), None,
                           activation="sigmoid", eps=self.plans[index].mixer_props.get("eps", EPS))
        h = F.linear(o.reshape(rows, heads * HEAD), w("o_proj"))
        self.at(f"layer {index}: gated norm and o")
        return h

    def mla(self, index: int, x: torch.Tensor) -> torch.Tensor:
        from fla.modules.norm.layernorm import rms_norm

        props, rows = self.plans[index].mixer_props, self.rows
        heads, nope, lora, v = props["heads"], props["nope"], props["lora"], props["v"]
        w = lambda name: self.layer(index, name)  # noqa: E731
        qr = F.linear(x, w("q_proj")).view(rows, heads, -1)
        kv = F.linear(x, w("kv_a"))
        # fla's norm reads whole rows: the latent part copied out of the kv_a product first
        latent = rms_norm(kv[:, :lora].contiguous(), w("kv_a_norm"), None, eps=props.get("latent_eps", 1e-6))
        q_nope = torch.bmm(qr[..., :nope].transpose(0, 1), w("w_kc"))
        query = torch.cat([q_nope.transpose(0, 1), qr[..., nope:]], dim=-1)
        pool = w("pool")
        pool.index_copy_(0, self.latent_writes, torch.cat([latent, kv[:, lora:]], dim=-1).unsqueeze(1))
        self.at(f"layer {index}: MLA projections, absorption and the latent rows written")
        self.anchors.sgl_decode.decode_attention_fwd(
            query, pool, pool[..., :lora], self.latent_out, self.kv_indptr, self.kv_indices, self.attn_logits,
            self.attn_lse, self.num_kv_splits, self.max_splits, props["scale"], 1.0, 1.0, logit_cap=0.0, sinks=None,
            xai_temperature_len=-1, has_mla=True, use_pdl=self.use_pdl, page_size=1, score_mod=None,
            aux_tensors=None, enable_lean=None, uneven_batch=self.uneven_batch)
        self.at(f"layer {index}: SGLang's MLA decode attention")
        o = torch.bmm(self.latent_out.transpose(0, 1), w("w_vc"))
        h = F.linear(o.transpose(0, 1).reshape(rows, heads * v), w("o_proj"))
        self.at(f"layer {index}: w_vc and o")
        return h

    def mixture(self, index: int, x: torch.Tensor) -> torch.Tensor:
        props, a, case = self.plans[index].mlp_props, self.anchors, self.moe
        w = lambda name: self.layer(index, name)  # noqa: E731
        scores = F.linear(x, w("router")).float()
        scores = scores.sigmoid() if props["scoring"] == "sigmoid" else scores.softmax(dim=-1)
        chosen = (scores + w("correction")).topk(props["top_k"], dim=-1).indices
        weights = scores.gather(1, chosen)
        if props.get("renormalize"):
            weights = weights / weights.sum(dim=-1, keepdim=True)
        self.routing_weights.copy_(weights)
        self.routing_ids.copy_(chosen)
        self.align()
        self.at(f"layer {index}: router and alignment")
        case.x, case.w1, case.w2 = x, w("w13"), w("w2")
        case._gemm(0, 1)
        a.sgl_moe.act_and_mul_triton(case.cache1, case.cache2, case.config, None, None, False, "silu")
        case._gemm(0, 2)
        a.sgl_moe.moe_sum_reduce_triton(case.cache3, case.out, props.get("routed_scaling", 1.0))
        self.at(f"layer {index}: SGLang's fused MoE")
        if f"{index}.shared_gate_up" not in self.tensors:
            return case.out.clone()
        h = case.out + self.dense_mlp(x, w("shared_gate_up"), w("shared_down"))
        self.at(f"layer {index}: shared expert")
        return h

    @staticmethod
    def dense_mlp(x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
        from fla.modules.activations.ops import swiglu_fwd

        both = F.linear(x, gate_up)
        half = both.shape[-1] // 2
        return F.linear(swiglu_fwd(both[:, :half], both[:, half:]), down)

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        from fla.modules.norm.layernorm import rms_norm

        h = self.tensors["top.embed"][self.tokens]
        self.at("embedding gather")
        residual = None
        for index, plan in self.plans.items():
            x, residual = rms_norm(h, self.layer(index, "input_norm"), None, residual=residual, eps=EPS, prenorm=True)
            h = self.kda(index, x) if plan.mixer == "kda" else self.mla(index, x)
            x, residual = rms_norm(h, self.layer(index, "post_norm"), None, residual=residual, eps=EPS, prenorm=True)
            if plan.mlp == "dense":
                h = self.dense_mlp(x, self.layer(index, "gate_up"), self.layer(index, "down"))
                self.at(f"layer {index}: MLP")
            else:
                h = self.mixture(index, x)
        x = rms_norm(h, self.tensors["top.norm"], None, residual=residual, eps=EPS)
        logits = F.linear(x, self.tensors["top.lm_head"])
        chosen = torch.argmax(logits, dim=-1)
        self.at("final norm, lm head and argmax")
        return chosen


def plan_context(program: Program) -> int | None:
    """The longest context the program's page table holds (pages a request x rows a page), or None
    for a program without one."""
    pages = next((i.shape for i in program.inputs if i.role == "pages"), None)
    caches = [s.shape for s in program.states if s.kind in ("kv", "latent")]
    if pages is None or not caches:
        return None
    return pages[1] * min(shape[1] for shape in caches)


def load_chain(program: Program, context: int | None, locate: bool) -> Chain:
    """The chain of `program` at `context`, SGLang's kernels loaded where its layers need them."""
    import measure

    needs = any(p.mixer == "mla" or p.mlp == "mixture" for p in layer_plans(program).values())
    anchors = measure.load_anchors("fused_moe_triton_kernels.py") if needs else None
    return Chain(program, served_inputs(program, context, SEED), context, locate=locate, anchors=anchors)


def one(path: Path, chain_only: bool, locate: bool) -> None:
    """One plan in this process: `row <batch> <tokens> <launches> <lanec us> <chain us>`."""
    torch.cuda.init()
    plan = Plan.read(path)
    program = Program.from_json(plan.program)
    ours = float("nan") if chain_only else step_us(path, graph=True, pdl=True)
    chain = load_chain(program, plan_context(program), locate)
    if locate:
        chain.step()
        torch.cuda.synchronize()
        print("step_chain: one eager chain step completed", flush=True)
        return
    theirs = median_graph_us(chain.step, STEPS_A_GRAPH, torch.cuda.Stream())
    print(f"row {program.batch} {program.tokens} {len(plan.launches)} {ours:.2f} {theirs:.2f}", flush=True)


def locate_failure(command: list[str], label: str, timeout: int = 420) -> None:
    """The chain again, alone and eagerly, each op synchronized: which op failed."""
    environment = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)
    tail = "\n    ".join((run.stdout + run.stderr).strip().splitlines()[-12:])
    print(f"  {label}: the chain alone, eagerly (exit {run.returncode}):\n    {tail}", flush=True)


def medians(rounds: dict[str, list[tuple[float, float]]]) -> list[str]:
    """The `--rounds` summary, a line a plan: its median lanec and chain times over its rounds
    (lanec us, chain us), the ratio of the medians and the lowest and highest round's ratio."""
    lines = [f"{'plan':<18} {'rounds':>6} {'lanec us':>9} {'chain us':>9} {'chain / lanec':>13} {'rounds range':>15}"]
    for name, timed in rounds.items():
        ours, theirs = float(np.median([t[0] for t in timed])), float(np.median([t[1] for t in timed]))
        ratios = [t[1] / t[0] for t in timed]
        lines.append(f"{name:<18} {len(timed):>6} {ours:>9.2f} {theirs:>9.2f} {theirs / ours:>12.2f}x "
                     f"{min(ratios):>7.2f}-{max(ratios):.2f}x")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every plan this many times, interleaved, then print the medians")
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
    failed, rounds = 0, {}
    for _ in range(options.rounds):
        for path in options.plans:
            command = [sys.executable, __file__, "--one", str(path)]
            run = subprocess.run(command, capture_output=True, text=True, timeout=420)
            rows = [line.split() for line in run.stdout.splitlines() if line.startswith("row ")]
            if run.returncode == 0 and rows:
                batch, tokens, launches, ours, theirs = rows[-1][1:]
                ours, theirs = float(ours), float(theirs)
                rounds.setdefault(path.stem, []).append((ours, theirs))
                print(f"{path.stem:<18} {batch:>5} {tokens:>6} {launches:>8} {ours:>9.2f} {theirs:>9.2f} "
                      f"{theirs / ours:>12.2f}x", flush=True)
                continue
            failed += 1
            tail = "\n    ".join((run.stdout + run.stderr).strip().splitlines()[-12:])
            print(f"{path.stem:<18} FAILED (exit {run.returncode}):\n    {tail}", flush=True)
            locate_failure([*command, "--chain-only", "--locate"], path.stem)
    if options.rounds > 1:
        print("\n".join(["", *medians(rounds)]), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
