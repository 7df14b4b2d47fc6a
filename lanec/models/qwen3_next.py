"""Qwen3-Next's decode step as a `form` module, layer by layer, unfused (transformers'
models/qwen3_next/modeling_qwen3_next.py, one `form` op a step of it).

- embed; per layer an input norm, the layer's token mixer (Gated DeltaNet or gated full
  attention, by `layer_types`), a residual add, a post-attention norm, its MLP (the mixture with
  the sigmoid-gated shared expert, or dense where `mlp_only_layers` / `decoder_sparse_step` say
  so), a residual add; the final norm, the lm_head product, argmax.
- Every RMS norm but the gated one is zero-centred: `x * rms * (1 + w)`. The form's norm keeps
  its meaning (`x * rms * w`); its weight is the checkpoint tensor plus one, bound by the name
  `<name>+1` (lanec/runtime/weights.py `PLUS_ONE`), so a checkpoint binds as published.
- Gated DeltaNet: one product of `in_proj_qkvz` cut by `form.part` into q, k, v, z (the rows are
  grouped by key head: q dk, k dk, v r dv, z r dv a key head, r = value heads / key heads), one of
  `in_proj_ba` cut into b and a (r, r a key head); a `form.conv` each for q, k and v over one conv
  state (channels 0, key_dim, 2 key_dim: `conv1d.weight`'s rows); L2 norm of q and k (eps 1e-6);
  the per-head decay `exp(-exp(A_log) * softplus(a + dt_bias))` (`form.kda_gate` of one value a
  head); beta = sigmoid(b); the delta rule (value heads share key heads as transformers'
  repeat_interleave, scale dk^-0.5); the per-head RMS norm times silu(z) (`norm_gated` swish);
  out_proj.
- Gated full attention: one product of `q_proj` cut into the query and its gate (2 hd a head:
  query then gate); k and v products; per-head zero-centred RMS norms of q and k (`form.head_norm`);
  rope on each head's first `head_dim * partial_rotary_factor` values; paged GQA attention; times
  sigmoid(gate); o_proj.
- Mixture: softmax routing, top-k, renormalised when `norm_topk_prob`, the shared expert times
  sigmoid(x . shared_expert_gate) as the mixture's fourth shared weight.

Checkpoint names are transformers' `Qwen3NextForCausalLM` names (those of Qwen/Qwen3-Next-80B-A3B),
layers counted from 0; routed experts per expert (`mlp.experts.N.gate_proj.weight`, ...) or
transformers 5's packed `mlp.experts.gate_up_proj` / `down_proj`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue

from lanec.dialects import form
from lanec.dialects.form import float_prop, int_prop, tensor
from lanec.models.builder import F32, FamilyStep, StepOptions
from lanec.models.config import ConfigError, Qwen3NextConfig

L2_EPS = 1e-6  # transformers' l2norm (use_qk_l2norm_in_kernel), as fla's


def qwen3_next_step(config: Qwen3NextConfig, options: StepOptions | None = None) -> ModuleOp:
    """The decode step of `config` under `options`, as a builtin.module holding one form.step
    (`options` None: the defaults)."""
    options = options or StepOptions()
    options.check(config.layers)
    options.refuse_kimi_options("Qwen3-Next")
    if options.slots is not None and options.slots < options.slots_needed():
        raise ConfigError(f"--slots: {options.slots} slots cannot serve {options.batch} requests of "
                          f"{options.tokens} tokens (at least {options.slots_needed()})")
    return Qwen3NextStep(config, options).build()


class Qwen3NextStep(FamilyStep):

    def norm(self, x: SSAValue, name: str) -> SSAValue:
        """The zero-centred RMS norm: the form's norm of the checkpoint weight plus one."""
        return self.b.norm(x, f"{name}+1", self.c.rms_eps)

    def mixer(self, x: SSAValue, p: str, layer: int) -> SSAValue:
        return self.gated_delta_net(x, p) if self.c.linear[layer] else self.attention(x, p)

    def mlp(self, x: SSAValue, p: str, layer: int) -> SSAValue:
        c = self.c
        if c.sparse[layer]:
            return self.mixture(x, f"{p}.mlp")
        return self.b.gated_mlp(x, f"{p}.mlp.gate_proj.weight", f"{p}.mlp.up_proj.weight",
                                f"{p}.mlp.down_proj.weight", c.dense_width)

    def gated_delta_net(self, x: SSAValue, p: str) -> SSAValue:
        c, b = self.c, self.b
        a = f"{p}.linear_attn"
        nk, nv, dk, dv = c.key_heads, c.value_heads, c.key_dim, c.value_dim
        r = nv // nk
        key_dim, value_dim = nk * dk, nv * dv
        unit = 2 * dk + 2 * r * dv
        qkvz = b.product(x, f"{a}.in_proj_qkvz.weight", nk * unit)
        q, k, v, z = (b.value(form.PartOp(qkvz, nk, unit, offset, length))
                      for offset, length in ((0, dk), (dk, dk), (2 * dk, r * dv), (2 * dk + r * dv, r * dv)))
        ba = b.product(x, f"{a}.in_proj_ba.weight", 2 * nv)
        beta_raw, g = (b.value(form.PartOp(ba, nk, 2 * r, offset, r)) for offset in (0, r))

        taps = c.conv_width - 1 + self.o.tokens - 1
        channels = 2 * key_dim + value_dim
        conv_state = b.state(f"{p}.conv", "conv", [self.slot_count, channels, taps])
        slots, accepted = self.slots(), self.accepted()
        w = f"{a}.conv1d.weight"
        q, k, v = (
            b.value(form.ConvOp(y, conv_state, b.weight(f"{w}[{first}:{first + width}]", [width, c.conv_width]),
                                slots, offset=first, accepted=accepted))
            for y, first, width in ((q, 0, key_dim), (k, key_dim, key_dim), (v, 2 * key_dim, value_dim))
        )
        q = b.value(form.L2NormOp(q, nk, L2_EPS))
        k = b.value(form.L2NormOp(k, nk, L2_EPS))

        a_log = b.weight(f"{a}.A_log", [nv], F32)
        dt_bias = b.weight(f"{a}.dt_bias", [nv], F32)
        decay = b.value(form.KdaGateOp(g, a_log, dt_bias, nv, "softplus"))
        beta = b.value(form.SigmoidOp(beta_raw))
        state = b.state(f"{p}.recurrent", "recurrent", [self.slot_count, nv, dv, dk], F32)
        o = b.value(form.DeltaRuleOp(q, k, v, decay, beta, state, slots, nv, nk, dk**-0.5, accepted=accepted))
        o = b.value(form.NormGatedOp(o, z, b.weight(f"{a}.norm.weight", [dv]), nv, c.rms_eps, "swish"))
        return b.product(o, f"{a}.out_proj.weight", c.hidden)

    def attention(self, x: SSAValue, p: str) -> SSAValue:
        c, b = self.c, self.b
        a = f"{p}.self_attn"
        hd = c.head
        qg = b.product(x, f"{a}.q_proj.weight", c.heads * 2 * hd)
        q, gate = (b.value(form.PartOp(qg, c.heads, 2 * hd, offset, hd)) for offset in (0, hd))
        k = b.product(x, f"{a}.k_proj.weight", c.kv_heads * hd)
        v = b.product(x, f"{a}.v_proj.weight", c.kv_heads * hd)
        q = b.value(form.HeadNormOp(q, b.weight(f"{a}.q_norm.weight+1", [hd]), c.heads, c.rms_eps))
        k = b.value(form.HeadNormOp(k, b.weight(f"{a}.k_norm.weight+1", [hd]), c.kv_heads, c.rms_eps))
        positions = b.input("positions", [b.rows])
        q = b.value(form.RopeOp(q, positions, c.heads, c.rotary, c.theta))
        k = b.value(form.RopeOp(k, positions, c.kv_heads, c.rotary, c.theta))
        cache = [b.batch * self.o.context_pages, self.o.page_size, c.kv_heads, hd]
        caches = [b.state(f"{p}.{name}_cache", "kv", cache) for name in ("key", "value")]
        pages = b.input("pages", [b.batch, self.o.context_pages])
        o = b.value(form.AttentionOp(
            operands=[q, k, v, *caches, pages, positions],
            properties={"heads": int_prop(c.heads), "kv_heads": int_prop(c.kv_heads), "scale": float_prop(hd**-0.5)},
            result_types=[tensor([b.rows, c.heads * hd])],
        ))
        o = b.value(form.MulOp(o, b.value(form.SigmoidOp(gate))))
        return b.product(o, f"{a}.o_proj.weight", c.hidden)

    def mixture(self, x: SSAValue, p: str) -> SSAValue:
        c, b = self.c, self.b
        e, width, hidden = c.experts, c.expert_width, c.hidden
        router = b.weight(f"{p}.gate.weight", [e, hidden])
        gate = b.weight(f"{p}.experts.*.gate_proj.weight", [e, width, hidden])
        up = b.weight(f"{p}.experts.*.up_proj.weight", [e, width, hidden])
        down = b.weight(f"{p}.experts.*.down_proj.weight", [e, hidden, width])
        shared = []
        if c.shared_width:
            s = f"{p}.shared_expert"
            shared = [b.weight(f"{s}.gate_proj.weight", [c.shared_width, hidden]),
                      b.weight(f"{s}.up_proj.weight", [c.shared_width, hidden]),
                      b.weight(f"{s}.down_proj.weight", [hidden, c.shared_width]),
                      b.weight(f"{p}.shared_expert_gate.weight", [1, hidden])]
        return b.value(form.MixtureOp(
            operands=[x, router, gate, up, down, [], shared, []],
            properties={"top_k": int_prop(c.top_k), "scoring": StringAttr("softmax"),
                        "renormalize": int_prop(int(c.renormalize)), "routed_scaling": float_prop(1.0)},
            result_types=[x.type],
        ))
