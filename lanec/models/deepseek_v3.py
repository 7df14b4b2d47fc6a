"""A DeepSeek-V3 decode step as a `form` module, layer by layer, unfused.

The step is what transformers' `DeepseekV3ForCausalLM` computes for one token (and what vLLM runs):

- embed; per layer an input norm, MLA, a residual add, a post-attention norm, the layer's MLP
  (dense for the first `first_k_dense_replace` layers, else the mixture plus the shared expert), a
  residual add; the final norm, the lm_head product, argmax.
- MLA: q through its LoRA (q_a product, q_a_layernorm, q_b product; or one q_proj where
  q_lora_rank is null); kv_a as one product in two parts (the latent, then the shared key's rope
  part: kv_a_proj_with_mqa's rows cut); the latent's norm (kv_a_layernorm); rope on each head's
  last `qk_rope_head_dim` query values (`offset` nope) and on the shared key, in DeepSeek's
  interleaved pairs where `rope_interleave` (transformers' default); latent attention over the
  latent cache with scale (nope + rope)^-0.5 (with YaRN, times yarn_get_mscale(factor,
  mscale_all_dim)^2 where mscale_all_dim is set, as transformers' `yarn_apply_mscale`); o_proj.
  A YaRN rope scaling (the published config's) is the rope's `scaling = "yarn"` properties, its
  attention factor (on cos and sin) resolved by the importer as `_compute_yarn_parameters` does.
  The LoRA norms take eps 1e-6 whatever the config says: transformers builds them as
  `DeepseekV3RMSNorm(rank)`, whose default that is.
- Mixture layers: `form.mixture` with sigmoid scores, the correction bias, grouped top-k
  (`groups` n_group, `topk_groups` topk_group), renormalised (norm_topk_prob) and scaled by
  routed_scaling_factor; the shared experts as one unfused gated MLP of width
  n_shared_experts x moe_intermediate_size; a `form.add` of the two.

Checkpoint names are transformers' (and deepseek-ai/DeepSeek-V3's): `model.layers.N.self_attn.
{q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj}.weight`,
`mlp.{gate,up,down}_proj.weight` (dense), `mlp.gate.weight`, `mlp.gate.e_score_correction_bias`,
`mlp.experts.*.{gate,up,down}_proj.weight` (per expert, or transformers 5's packed
`mlp.experts.gate_up_proj` / `down_proj`), `mlp.shared_experts.{gate,up,down}_proj.weight`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from lanec.dialects import form
from lanec.dialects.form import int_prop
from lanec.models.builder import FamilyStep, StepOptions
from lanec.models.config import DeepseekV3Config

LORA_NORM_EPS = 1e-6  # q_a_layernorm and kv_a_layernorm: DeepseekV3RMSNorm's default eps


def deepseek_v3_step(config: DeepseekV3Config, options: StepOptions | None = None) -> ModuleOp:
    """The decode step of `config` under `options`, as a builtin.module holding one form.step
    (`options` None: the defaults)."""
    options = options or StepOptions()
    options.check(config.layers)
    options.refuse_kimi_options("DeepSeek-V3 (no state slots, KDA or dense-MLP variant)", slots=True)
    return DeepseekV3Step(config, options).build()


class DeepseekV3Step(FamilyStep):

    def mlp(self, x: SSAValue, p: str, layer: int) -> SSAValue:
        if self.c.is_dense(layer):
            return self.b.gated_mlp(x, f"{p}.mlp.gate_proj.weight", f"{p}.mlp.up_proj.weight",
                                    f"{p}.mlp.down_proj.weight", self.c.dense_width)
        return self.mixture(x, f"{p}.mlp")

    def mixer(self, x: SSAValue, p: str, layer: int) -> SSAValue:
        """MLA: the query (through its LoRA where the config has one), the latent and its rotated key,
        the latent attention over the paged cache, the o product."""
        c, b = self.c, self.b
        a = f"{p}.self_attn"
        heads, nope, rope, lora, v = c.heads, c.nope, c.rope, c.lora, c.v_head_dim
        if c.q_lora is None:
            qr = b.product(x, f"{a}.q_proj.weight", heads * (nope + rope))
        else:
            q_a = b.norm(b.product(x, f"{a}.q_a_proj.weight", c.q_lora), f"{a}.q_a_layernorm.weight", LORA_NORM_EPS)
            qr = b.product(q_a, f"{a}.q_b_proj.weight", heads * (nope + rope))
        kv_a = f"{a}.kv_a_proj_with_mqa.weight"
        latent, k_rope = b.products(x, [(f"{kv_a}[0:{lora}]", lora), (f"{kv_a}[{lora}:{lora + rope}]", rope)])
        latent = b.norm(latent, f"{a}.kv_a_layernorm.weight", LORA_NORM_EPS)
        positions = b.input("positions", [b.rows])
        yarn = None if c.scaling is None else c.scaling.form()
        qr = b.value(form.RopeOp(qr, positions, heads, rope, c.theta, offset=nope, interleaved=c.interleaved,
                                 yarn=yarn))
        k_rope = b.value(form.RopeOp(k_rope, positions, 1, rope, c.theta, interleaved=c.interleaved, yarn=yarn))
        scale = (nope + rope) ** (-0.5)  # transformers' qk_head_dim ** (-0.5), then yarn_apply_mscale
        if c.scaling is not None:
            scale = c.scaling.softmax_scale(scale)
        return self.latent_attention(p, a, qr, latent, k_rope, positions, heads, nope, rope, lora, v, scale)

    def mixture(self, x: SSAValue, p: str) -> SSAValue:
        c = self.c
        groups = {"groups": int_prop(c.groups), "topk_groups": int_prop(c.topk_groups)} if c.groups > 1 else {}
        return self.routed_mixture(x, p, ("gate_proj", "up_proj", "down_proj"), "sigmoid", **groups)
