"""Kimi Linear's decode step as a `form` module, layer by layer, unfused.

The step is what vLLM runs for Kimi-Linear-48B-A3B (vllm/model_executor/models/kimi_linear.py and
layers/kda.py), one `form` op a step of it, with nothing folded: the fusion rules do that.

- embed; per layer an input norm, the layer's attention (KDA or MLA), a residual add, a
  post-attention norm, its MLP (dense, or the mixture plus the shared expert), a residual add;
  the final norm, the lm_head product, argmax. Residual adds are plain `form.add` and norms take
  no residual: folding the add into the next norm is a rule's job.
- KDA: separate products q, k, v, f_a, b, g_a of the normed activation; a `form.conv` each for q,
  k, v over one conv state of the layer (channels 0, dim, 2 dim); L2 norm of q and k; f_b of
  f_a's output and the softplus gate; beta = sigmoid(b); the delta rule; g_b of g_a's output and
  the sigmoid-gated per-head norm; o_proj.
- MLA (no q LoRA, NoPE): the q product; kv_a as one product in two parts (the latent, then the
  shared rotated key: the checkpoint's one kv_a_proj_with_mqa tensor cut by rows); the latent's
  norm; latent attention over the latent cache; o_proj.
- Mixture layers: `form.mixture` without its shared expert, the shared expert as an unfused
  gated MLP, and a `form.add` of the two (folding it in is a rule's job).

Checkpoint names are the Hugging Face names of moonshotai/Kimi-Linear-48B-A3B-Instruct, layers
counted from 0; lanec/models/README.md gives the conventions for stacked experts (`*`), row
slices (`[a:b]`) and reshaped tensors.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from lanec.dialects import form
from lanec.models.builder import F32, FamilyStep, StepOptions
from lanec.models.config import ConfigError, KimiLinearConfig

L2_EPS = 1e-6  # fla's l2norm in fused_recurrent_kda (use_qk_l2norm_in_kernel)
# Moonshot's Hugging Face modeling code builds kv_a_layernorm as KimiRMSNorm(kv_lora_rank), whose
# default eps is 1e-6, not the config's rms_norm_eps (vLLM passes rms_norm_eps, 1e-5; we follow Moonshot).
LATENT_NORM_EPS = 1e-6


def check_options(options: StepOptions, config: KimiLinearConfig) -> None:
    options.check(config.layers)
    if options.slots is not None and options.slots < options.slots_needed():
        raise ConfigError(f"--slots: {options.slots} slots cannot serve {options.batch} requests of "
                          f"{options.tokens} tokens (a slot a row, and slot 0 is never used: at least "
                          f"{options.slots_needed()})")
    if options.dense_mlp is not None and options.dense_mlp < 1:
        raise ConfigError(f"--dense-mlp: width {options.dense_mlp} must be at least 1")
    if options.kda_only and not any(config.is_kda(n) for n in range(1, (options.layers or config.layers) + 1)):
        raise ConfigError("--kda-only: the chosen layers have no KDA layer")


def kimi_linear_step(config: KimiLinearConfig, options: StepOptions | None = None) -> ModuleOp:
    """The decode step of `config` under `options`, as a builtin.module holding one form.step
    (`options` None: the defaults)."""
    options = options or StepOptions()
    check_options(options, config)
    return KimiLinearStep(config, options).build()


class KimiLinearStep(FamilyStep):

    # -- step inputs --------------------------------------------------------------------------

    # -- the step -----------------------------------------------------------------------------

    def build(self) -> ModuleOp:
        c, b = self.c, self.b
        tokens = b.input("tokens", [b.rows])
        table = b.weight("model.embed_tokens.weight", [c.vocab, c.hidden])
        h = b.value(form.EmbedOp(tokens, table))
        for layer in range(1, (self.o.layers or c.layers) + 1):
            if self.o.kda_only and not c.is_kda(layer):
                continue
            h = self.layer(h, layer)
        x = b.norm(h, "model.norm.weight", c.rms_eps)
        return b.outputs(b.logits(x, table, c.tied_embeddings), self.o)

    def layer(self, h: SSAValue, layer: int) -> SSAValue:
        c, b = self.c, self.b
        p = f"model.layers.{layer - 1}"
        x = b.norm(h, f"{p}.input_layernorm.weight", c.rms_eps)
        attention = self.kda(x, p) if c.is_kda(layer) else self.mla(x, p)
        h = b.add(h, attention)
        x = b.norm(h, f"{p}.post_attention_layernorm.weight", c.rms_eps)
        if self.o.dense_mlp is not None:
            mlp = b.gated_mlp(x, f"{p}.mlp.gate_proj.weight", f"{p}.mlp.up_proj.weight",
                              f"{p}.mlp.down_proj.weight", self.o.dense_mlp)
        elif c.is_dense(layer):
            mlp = b.gated_mlp(x, f"{p}.mlp.gate_proj.weight", f"{p}.mlp.up_proj.weight",
                              f"{p}.mlp.down_proj.weight", c.dense_width)
        else:
            mlp = self.mixture(x, f"{p}.block_sparse_moe")
        return b.add(h, mlp)

    def kda(self, x: SSAValue, p: str) -> SSAValue:
        c, b = self.c, self.b
        heads, size = c.kda_heads, c.kda_head_dim
        dim = heads * size
        a = f"{p}.self_attn"
        q, k, v = (b.product(x, f"{a}.{n}_proj.weight", dim) for n in "qkv")
        f_a = b.product(x, f"{a}.f_a_proj.weight", size)
        beta_raw = b.product(x, f"{a}.b_proj.weight", heads)
        g_a = b.product(x, f"{a}.g_a_proj.weight", size)

        taps = c.conv_width - 1 + self.o.tokens - 1
        conv_state = b.state(f"{p}.conv", "conv", [self.slot_count, 3 * dim, taps])
        slots, accepted = self.slots(), self.accepted()
        q, k, v = (
            b.value(form.ConvOp(y, conv_state, b.weight(f"{a}.{n}_conv1d.weight", [dim, c.conv_width]), slots,
                                offset=i * dim, accepted=accepted))
            for i, (n, y) in enumerate(zip("qkv", (q, k, v)))
        )
        q = b.value(form.L2NormOp(q, heads, L2_EPS))
        k = b.value(form.L2NormOp(k, heads, L2_EPS))

        f_b = b.product(f_a, f"{a}.f_b_proj.weight", dim)
        a_log = b.weight(f"{a}.A_log", [heads], F32)
        dt_bias = b.weight(f"{a}.dt_bias", [dim], F32)
        decay = b.value(form.KdaGateOp(f_b, a_log, dt_bias, heads, "softplus"))
        beta = b.value(form.SigmoidOp(beta_raw))
        state = b.state(f"{p}.recurrent", "recurrent", [self.slot_count, heads, size, size], F32)
        o = b.value(form.DeltaRuleOp(q, k, v, decay, beta, state, slots, heads, heads, size**-0.5,
                                     accepted=accepted))

        g_b = b.product(g_a, f"{a}.g_b_proj.weight", dim)
        o_norm = b.weight(f"{a}.o_norm.weight", [size])
        o = b.value(form.NormGatedOp(o, g_b, o_norm, heads, c.rms_eps, "sigmoid"))
        return b.product(o, f"{a}.o_proj.weight", c.hidden)

    def mla(self, x: SSAValue, p: str) -> SSAValue:
        c, b = self.c, self.b
        a = f"{p}.self_attn"
        heads, nope, rope, lora, v = c.mla_heads, c.nope, c.rope, c.lora, c.v_head_dim
        qr = b.product(x, f"{a}.q_proj.weight", heads * (nope + rope))
        kv_a = f"{a}.kv_a_proj_with_mqa.weight"
        latent, k_rope = b.products(x, [(f"{kv_a}[0:{lora}]", lora), (f"{kv_a}[{lora}:{lora + rope}]", rope)])
        latent = b.norm(latent, f"{a}.kv_a_layernorm.weight", LATENT_NORM_EPS)
        return self.latent_attention(p, a, qr, latent, k_rope, b.input("positions", [b.rows]), heads, nope, rope,
                                     lora, v)

    def mixture(self, x: SSAValue, p: str) -> SSAValue:
        return self.routed_mixture(x, p, ("w1", "w3", "w2"), self.c.scoring)
