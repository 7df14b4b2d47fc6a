"""A Llama-3 / 3.1 decode step as a `form` module, layer by layer, unfused (the dense example,
`dense.py`, is this step with toy numbers).

embed; per layer an RMS norm, the q, k and v products (of one activation: the rules merge them
into one product in parts), rope on q and k (Llama 3.1's frequency scaling where the config has
it), paged GQA attention over the layer's key and value caches (`form.state` kind kv, `[batch *
context pages, page size, kv heads, head]`), the o product and a residual add; an RMS norm, gate
and up products, swiglu, the down product and a residual add; the final norm, the lm_head product
(the embedding table when tied) and argmax. The step reads tokens, positions and the page table
(`[batch, context pages]`).

Checkpoint names are transformers' `LlamaForCausalLM` names (`model.embed_tokens.weight`,
`model.layers.N.self_attn.q_proj.weight`, `model.layers.N.mlp.gate_proj.weight`,
`model.norm.weight`, `lm_head.weight`), layers counted from 0.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from lanec.dialects import form
from lanec.dialects.form import float_prop, int_prop, tensor
from lanec.models.builder import FamilyStep, StepOptions
from lanec.models.config import LlamaConfig


def llama_step(config: LlamaConfig, options: StepOptions | None = None) -> ModuleOp:
    """The decode step of `config` under `options`, as a builtin.module holding one form.step
    (`options` None: the defaults)."""
    options = options or StepOptions()
    options.check(config.layers)
    options.refuse_kimi_options("Llama (no state slots, KDA or mixture)", slots=True)
    return LlamaStep(config, options).build()


class LlamaStep(FamilyStep):

    def mlp(self, x: SSAValue, p: str, layer: int) -> SSAValue:
        return self.b.gated_mlp(x, f"{p}.mlp.gate_proj.weight", f"{p}.mlp.up_proj.weight",
                                f"{p}.mlp.down_proj.weight", self.c.width)

    def mixer(self, x: SSAValue, p: str, layer: int) -> SSAValue:
        """q, k, v products, rope on q and k, GQA over the paged caches, the o product."""
        c, b = self.c, self.b
        a = f"{p}.self_attn"
        q = b.product(x, f"{a}.q_proj.weight", c.heads * c.head)
        k = b.product(x, f"{a}.k_proj.weight", c.kv_heads * c.head)
        v = b.product(x, f"{a}.v_proj.weight", c.kv_heads * c.head)
        positions = b.input("positions", [b.rows])
        s = c.scaling
        llama3 = None if s is None else (s.factor, s.low_freq_factor, s.high_freq_factor, s.original_context)
        q = b.value(form.RopeOp(q, positions, c.heads, c.head, c.theta, llama3))
        k = b.value(form.RopeOp(k, positions, c.kv_heads, c.head, c.theta, llama3))
        cache = [b.batch * self.o.context_pages, self.o.page_size, c.kv_heads, c.head]
        caches = [b.state(f"{p}.{name}_cache", "kv", cache) for name in ("key", "value")]
        pages = b.input("pages", [b.batch, self.o.context_pages])
        o = b.value(form.AttentionOp(
            operands=[q, k, v, *caches, pages, positions],
            properties={"heads": int_prop(c.heads), "kv_heads": int_prop(c.kv_heads),
                        "scale": float_prop(c.head**-0.5)},
            result_types=[tensor([b.rows, c.heads * c.head])],
        ))
        return b.product(o, f"{a}.o_proj.weight", c.hidden)
