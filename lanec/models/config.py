"""A Hugging Face `config.json` read into the facts an importer builds from.

Every field is checked where it is read: a missing field, a field of the wrong type, or two fields
that contradict each other is a `ConfigError` whose message is one line naming the field, which
`lanec import` shows as it is. Only what the importer uses is read; the rest of the config is left
alone (tokenizer ids, dtype, quantization notes of other engines).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A config.json the importer cannot build from: one line, naming the field."""


_MISSING = object()


class Fields:
    """Typed reads of one JSON object; `where` prefixes field names (e.g. `linear_attn_config.`)."""

    def __init__(self, data: Mapping[str, Any], where: str = ""):
        self.data = data
        self.where = where

    def name(self, key: str) -> str:
        return f"{self.where}{key}"

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        if key in self.data and self.data[key] is not None:
            return self.data[key]
        if default is _MISSING:
            raise ConfigError(f"{self.name(key)}: missing (the importer needs it)")
        return default

    def int(self, key: str, default: Any = _MISSING, minimum: int = 1) -> int:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{self.name(key)}: expected an integer, got {value!r}")
        if value < minimum:
            raise ConfigError(f"{self.name(key)}: {value} is below {minimum}")
        return value

    def float(self, key: str, default: Any = _MISSING, positive: bool = True) -> float:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{self.name(key)}: expected a number, got {value!r}")
        if positive and value <= 0:
            raise ConfigError(f"{self.name(key)}: {value} must be positive")
        return float(value)

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.name(key)}: expected true or false, got {value!r}")
        return value

    def str(self, key: str, default: Any = _MISSING, choices: tuple[str, ...] = ()) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise ConfigError(f"{self.name(key)}: expected a string, got {value!r}")
        if choices and value not in choices:
            raise ConfigError(f"{self.name(key)}: '{value}' is not one of {', '.join(choices)}")
        return value

    def ints(self, key: str) -> tuple[int, ...]:
        value = self.raw(key)
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise ConfigError(f"{self.name(key)}: expected a list of integers, got {value!r}")
        return tuple(value)

    def strs(self, key: str, choices: tuple[str, ...]) -> tuple[str, ...]:
        value = self.raw(key)
        if not isinstance(value, list) or any(v not in choices for v in value):
            raise ConfigError(f"{self.name(key)}: expected a list of {', '.join(choices)}, got {value!r}")
        return tuple(value)

    def object(self, key: str) -> Fields:
        value = self.raw(key)
        if not isinstance(value, dict):
            raise ConfigError(f"{self.name(key)}: expected an object, got {value!r}")
        return Fields(value, f"{self.name(key)}.")


@dataclass(frozen=True)
class KimiLinearConfig:
    """Kimi Linear (KDA + MLA + a mixture with a shared expert), as its config.json gives it.
    Layer numbers in `kda_layers` / `mla_layers` are 1-indexed, as `linear_attn_config` lists them;
    checkpoint names count layers from 0."""

    hidden: int
    layers: int
    vocab: int
    rms_eps: float
    tied_embeddings: bool
    # KDA ("linear attention")
    kda_layers: tuple[int, ...]
    kda_heads: int
    kda_head_dim: int
    conv_width: int
    # MLA ("full attention")
    mla_layers: tuple[int, ...]
    mla_heads: int
    nope: int
    rope: int
    lora: int
    v_head_dim: int
    # MLPs: the first `first_dense` layers dense, the rest a mixture
    dense_width: int
    first_dense: int
    experts: int
    top_k: int
    expert_width: int
    shared_experts: int
    scoring: str
    renormalize: bool
    routed_scaling: float

    def is_kda(self, layer: int) -> bool:
        """Whether 1-indexed `layer` is a KDA layer (else MLA)."""
        return layer in self.kda_layers

    def is_dense(self, layer: int) -> bool:
        """Whether 1-indexed `layer` has the dense MLP (else the mixture)."""
        return layer <= self.first_dense


def config_fields(data: Mapping[str, Any], model_type: str) -> Fields:
    """A config.json object's fields, checked to be of `model_type` with SwiGLU's silu."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"config: expected a JSON object, got {type(data).__name__}")
    f = Fields(data)
    found = f.str("model_type")
    if found != model_type:
        raise ConfigError(f"model_type: '{found}' is not {model_type}")
    f.str("hidden_act", "silu", choices=("silu",))
    return f


def kimi_linear_config(data: Mapping[str, Any]) -> KimiLinearConfig:
    """Read and validate a Kimi Linear config.json (a dict)."""
    f = config_fields(data, "kimi_linear")
    layers = f.int("num_hidden_layers")

    # transformers' KimiLinearConfig reads the heads and the layer kinds from `linear_attn_config`
    # (the published form) or, without it, from its own fields; `layer_types`, where present, is
    # preferred over the lists (as transformers prefers it)
    if f.raw("linear_attn_config", None) is not None:
        linear = f.object("linear_attn_config")
        heads_field, head_dim_field, conv_field = "num_heads", "head_dim", "short_conv_kernel_size"
    else:
        linear = f
        heads_field, head_dim_field, conv_field = "linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim"
    if f.raw("layer_types", None) is not None:
        kinds = f.strs("layer_types", ("linear_attention", "full_attention"))
        if len(kinds) != layers:
            raise ConfigError(f"layer_types: {len(kinds)} layer types for num_hidden_layers {layers}")
        kda_layers = tuple(n for n, kind in enumerate(kinds, 1) if kind == "linear_attention")
        mla_layers = tuple(n for n, kind in enumerate(kinds, 1) if kind == "full_attention")
    elif linear is f:  # transformers' default pattern: full attention at every fourth layer after the first
        kda_layers = tuple(n for n in range(1, layers + 1) if not (n - 1 and (n - 1) % 4 == 0))
        mla_layers = tuple(n for n in range(1, layers + 1) if n - 1 and (n - 1) % 4 == 0)
    else:
        kda_layers, mla_layers = linear.ints("kda_layers"), linear.ints("full_attn_layers")
    for key, listed in (("kda_layers", kda_layers), ("full_attn_layers", mla_layers)):
        outside = [n for n in listed if not 1 <= n <= layers]
        if outside:
            raise ConfigError(f"linear_attn_config.{key}: layers {outside} are outside 1..{layers} "
                              f"(num_hidden_layers {layers}; the lists are 1-indexed)")
        if len(set(listed)) != len(listed):
            raise ConfigError(f"linear_attn_config.{key}: lists a layer twice")
    both = sorted(set(kda_layers) & set(mla_layers))
    if both:
        raise ConfigError(f"linear_attn_config: layers {both} are in both kda_layers and full_attn_layers")
    neither = sorted(set(range(1, layers + 1)) - set(kda_layers) - set(mla_layers))
    if neither:
        raise ConfigError(f"linear_attn_config: layers {neither} are in neither kda_layers nor full_attn_layers")
    if linear.raw("gate_lower_bound", None) is not None:
        raise ConfigError("linear_attn_config.gate_lower_bound: Kimi Linear 48B's gate is the softplus form; "
                          "the lower-bound form (Kimi K3) is not imported yet")
    if linear.bool("use_full_rank_gate", False):
        raise ConfigError("linear_attn_config.use_full_rank_gate: only the low-rank (f_a, f_b) gate is imported")

    if f.raw("q_lora_rank", None) is not None:
        raise ConfigError(f"q_lora_rank: {f.raw('q_lora_rank')}: the importer takes Kimi Linear's q projection "
                          "without a LoRA (q_lora_rank null)")
    # transformers' Kimi Linear MLA is NoPE whatever the config says; a config without the field is read so
    if mla_layers and not f.bool("mla_use_nope", True):
        raise ConfigError("mla_use_nope: false asks for rotary MLA; Kimi Linear's MLA layers are NoPE (true)")
    if f.bool("mla_use_output_gate", False):
        raise ConfigError("mla_use_output_gate: the MLA output gate (Kimi K3) is not imported yet")

    experts = f.int("num_experts")
    top_k = f.int("num_experts_per_token")
    if top_k > experts:
        raise ConfigError(f"num_experts_per_token: {top_k} is more than the {experts} experts (num_experts)")
    for key in ("num_expert_group", "topk_group", "moe_layer_freq"):
        if f.int(key, 1) != 1:
            raise ConfigError(f"{key}: {f.raw(key)}: only 1 is imported (no grouped top-k, every layer a mixture)")
    # transformers' defaults where a config leaves a field out: the first layer dense, one shared expert,
    # routed weights scaled by 2.446 (KimiLinearConfig); `mlp_layer_types`, where present, is preferred
    first_dense = f.int("first_k_dense_replace", 1, minimum=0)
    if first_dense > layers:
        raise ConfigError(f"first_k_dense_replace: {first_dense} is more than the {layers} layers")
    if f.raw("mlp_layer_types", None) is not None:
        mlp_kinds = f.strs("mlp_layer_types", ("dense", "sparse"))
        first_dense = mlp_kinds.index("sparse") if "sparse" in mlp_kinds else len(mlp_kinds)
        if len(mlp_kinds) != layers or "dense" in mlp_kinds[first_dense:]:
            raise ConfigError(f"mlp_layer_types: only {layers} types, dense layers first then sparse, are imported; "
                              f"got {list(mlp_kinds)}")

    return KimiLinearConfig(
        hidden=f.int("hidden_size"),
        layers=layers,
        vocab=f.int("vocab_size"),
        rms_eps=f.float("rms_norm_eps"),
        tied_embeddings=f.bool("tie_word_embeddings", False),
        kda_layers=tuple(sorted(kda_layers)),
        kda_heads=linear.int(heads_field, 32 if linear is f else _MISSING),
        kda_head_dim=linear.int(head_dim_field, 128 if linear is f else _MISSING),
        conv_width=linear.int(conv_field, 4 if linear is f else _MISSING, minimum=2),
        mla_layers=tuple(sorted(mla_layers)),
        mla_heads=f.int("num_attention_heads"),
        nope=f.int("qk_nope_head_dim"),
        rope=f.int("qk_rope_head_dim", minimum=0),
        lora=f.int("kv_lora_rank"),
        v_head_dim=f.int("v_head_dim"),
        dense_width=f.int("intermediate_size"),
        first_dense=first_dense,
        experts=experts,
        top_k=top_k,
        expert_width=f.int("moe_intermediate_size"),
        shared_experts=f.int("num_shared_experts", 1, minimum=0),
        scoring=f.str("moe_router_activation_func", "sigmoid", choices=("sigmoid", "softmax")),
        renormalize=f.bool("moe_renormalize", True),
        routed_scaling=f.float("routed_scaling_factor", 2.446),
    )


@dataclass(frozen=True)
class Llama3Scaling:
    """Llama 3.1's rope frequency scaling (`rope_type` llama3)."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_context: int  # original_max_position_embeddings


@dataclass(frozen=True)
class LlamaConfig:
    """A Llama-3 / 3.1 model (GQA with rope, a SwiGLU MLP), as its config.json gives it."""

    hidden: int
    width: int  # the MLP's intermediate_size
    vocab: int
    layers: int
    heads: int
    kv_heads: int
    head: int
    rms_eps: float
    theta: float
    scaling: Llama3Scaling | None
    tied_embeddings: bool


LLAMA_DEFAULT_THETA = 10000.0  # transformers' LlamaConfig where a config gives no rope_theta


def llama_config(data: Mapping[str, Any]) -> LlamaConfig:
    """Read and validate a Llama config.json (a dict). Fields left out take transformers' LlamaConfig
    defaults where it has one the importer can trust (head_dim hidden / heads, kv heads = heads,
    no scaling, untied)."""
    f = config_fields(data, "llama")
    for key in ("attention_bias", "mlp_bias"):
        if f.bool(key, False):
            raise ConfigError(f"{key}: true: the importer takes Llama's projections without biases (false)")
    if f.int("pretraining_tp", 1) != 1:
        raise ConfigError(f"pretraining_tp: {f.raw('pretraining_tp')}: only 1 is imported")
    hidden, heads = f.int("hidden_size"), f.int("num_attention_heads")
    kv_heads = f.int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise ConfigError(f"num_key_value_heads: {kv_heads} do not share the {heads} attention heads evenly")
    if f.raw("head_dim", None) is None and hidden % heads:
        raise ConfigError(f"head_dim: missing, and hidden_size {hidden} does not split into {heads} heads")
    head = f.int("head_dim", hidden // heads)
    theta, scaling = rope_of(f)
    return LlamaConfig(
        hidden=hidden,
        width=f.int("intermediate_size"),
        vocab=f.int("vocab_size"),
        layers=f.int("num_hidden_layers"),
        heads=heads,
        kv_heads=kv_heads,
        head=head,
        rms_eps=f.float("rms_norm_eps"),
        theta=theta,
        scaling=scaling,
        tied_embeddings=f.bool("tie_word_embeddings", False),
    )


def rope_of(f: Fields) -> tuple[float, Llama3Scaling | None]:
    """rope's base and scaling: transformers 5 writes them as one `rope_parameters` object
    (rope_theta, rope_type, ...); published configs as `rope_theta` and a `rope_scaling` object
    (rope_type or type). A llama3 scaling without original_max_position_embeddings takes
    max_position_embeddings, as transformers does."""
    if f.raw("rope_parameters", None) is not None:
        rope = f.object("rope_parameters")
        theta = rope.float("rope_theta", f.float("rope_theta", LLAMA_DEFAULT_THETA))
    else:
        rope = f.object("rope_scaling") if f.raw("rope_scaling", None) is not None else Fields({}, "rope_scaling.")
        theta = f.float("rope_theta", LLAMA_DEFAULT_THETA)
    if rope.float("partial_rotary_factor", 1.0) != 1.0:
        raise ConfigError(f"{rope.name('partial_rotary_factor')}: only 1.0 is imported (rope on whole heads)")
    kind = rope.str("rope_type", rope.str("type", "default"))
    if kind == "default":
        return theta, None
    if kind != "llama3":
        raise ConfigError(f"{rope.name('rope_type')}: '{kind}' is not imported (default, llama3)")
    low, high = rope.float("low_freq_factor"), rope.float("high_freq_factor")
    if low >= high:
        raise ConfigError(f"{rope.name('low_freq_factor')}: {low} must be below high_freq_factor {high}")
    factor = rope.float("factor")
    if factor < 1:
        raise ConfigError(f"{rope.name('factor')}: {factor} must be at least 1")
    if rope.raw("original_max_position_embeddings", None) is None:
        original = f.int("max_position_embeddings")
    else:
        original = rope.int("original_max_position_embeddings")
    return theta, Llama3Scaling(factor, low, high, original)


@dataclass(frozen=True)
class DeepseekV3Config:
    """DeepSeek-V3 (MLA with q LoRA and rope, the first layers dense, a grouped top-k mixture with
    a shared expert), as its config.json gives it. Layers count from 0, as the checkpoint does."""

    hidden: int
    layers: int
    vocab: int
    rms_eps: float
    tied_embeddings: bool
    # MLA
    heads: int
    q_lora: int | None  # None: one q_proj
    nope: int
    rope: int
    lora: int
    v_head_dim: int
    theta: float
    scaling: YarnScaling | None  # None: the default rope
    interleaved: bool  # rope_interleave: pairs (2i, 2i + 1)
    # MLPs: the first `first_dense` layers dense, the rest a mixture
    dense_width: int
    first_dense: int
    experts: int
    top_k: int
    expert_width: int
    shared_experts: int
    groups: int
    topk_groups: int
    renormalize: bool
    routed_scaling: float

    def is_dense(self, layer: int) -> bool:
        """Whether 0-indexed `layer` has the dense MLP (else the mixture)."""
        return layer < self.first_dense


def deepseek_v3_config(data: Mapping[str, Any]) -> DeepseekV3Config:
    """Read and validate a DeepSeek-V3 config.json (a dict). Fields left out take transformers'
    DeepseekV3Config defaults (q_lora_rank 1536, first_k_dense_replace 3, n_shared_experts 1,
    routed_scaling_factor 2.5, n_group 8, topk_group 4, norm_topk_prob, rope_interleave)."""
    f = config_fields(data, "deepseek_v3")
    if f.bool("attention_bias", False):
        raise ConfigError("attention_bias: true: the importer takes DeepSeek-V3's projections without biases")
    # transformers' router always scores by sigmoid and chooses by the corrected grouped top-k
    # (DeepSeek's scoring_func "sigmoid", topk_method "noaux_tc"); other values are other models
    f.str("scoring_func", "sigmoid", choices=("sigmoid",))
    f.str("topk_method", "noaux_tc", choices=("noaux_tc",))
    if f.int("moe_layer_freq", 1) != 1:
        raise ConfigError(f"moe_layer_freq: {f.raw('moe_layer_freq')}: only 1 is imported (every layer after "
                          "the first dense ones a mixture)")
    layers, heads = f.int("num_hidden_layers"), f.int("num_attention_heads")
    if f.int("num_key_value_heads", heads) != heads:
        raise ConfigError(f"num_key_value_heads: {f.raw('num_key_value_heads')}: MLA expands the latent to "
                          f"every head; only num_attention_heads ({heads}) is imported")
    theta, scaling = scaled_rope_theta(f)
    experts, top_k = f.int("n_routed_experts", 256), f.int("num_experts_per_tok", 8)
    if top_k > experts:
        raise ConfigError(f"num_experts_per_tok: {top_k} is more than the {experts} experts (n_routed_experts)")
    groups, kept = f.int("n_group", 8), f.int("topk_group", 4)
    if experts % groups or experts // groups < 2:
        raise ConfigError(f"n_group: {groups} groups must split the {experts} experts into groups of at least 2")
    if kept > groups:
        raise ConfigError(f"topk_group: {kept} is more than the {groups} groups (n_group)")
    if top_k > kept * (experts // groups):
        raise ConfigError(f"num_experts_per_tok: {top_k} is more than the {kept * (experts // groups)} experts "
                          f"of the {kept} kept groups (topk_group)")
    first_dense = f.int("first_k_dense_replace", 3, minimum=0)
    if first_dense > layers:
        raise ConfigError(f"first_k_dense_replace: {first_dense} is more than the {layers} layers")
    return DeepseekV3Config(
        hidden=f.int("hidden_size"),
        layers=layers,
        vocab=f.int("vocab_size"),
        rms_eps=f.float("rms_norm_eps", 1e-6),
        tied_embeddings=f.bool("tie_word_embeddings", False),
        heads=heads,
        # a null q_lora_rank is DeepSeek's q_proj without LoRA; a missing one takes transformers' 1536
        q_lora=None if "q_lora_rank" in data and data["q_lora_rank"] is None else f.int("q_lora_rank", 1536),
        nope=f.int("qk_nope_head_dim", 128),
        rope=f.int("qk_rope_head_dim", 64),
        lora=f.int("kv_lora_rank", 512),
        v_head_dim=f.int("v_head_dim", 128),
        theta=theta,
        scaling=scaling,
        interleaved=f.bool("rope_interleave", True),
        dense_width=f.int("intermediate_size", 18432),
        first_dense=first_dense,
        experts=experts,
        top_k=top_k,
        expert_width=f.int("moe_intermediate_size", 2048),
        shared_experts=f.int("n_shared_experts", 1, minimum=0),
        groups=groups,
        topk_groups=kept,
        renormalize=f.bool("norm_topk_prob", True),
        routed_scaling=f.float("routed_scaling_factor", 2.5),
    )


@dataclass(frozen=True)
class YarnScaling:
    """YaRN rope scaling (`rope_type` / `type` yarn) as transformers' `_compute_yarn_parameters`
    resolves it, and the softmax scale DeepSeek-V3's attention takes from it."""

    factor: float
    original_context: int  # original_max_position_embeddings
    beta_fast: float
    beta_slow: float
    truncate: bool
    attention_factor: float  # on cos and sin
    mscale_all_dim: float  # 0: the softmax scale is unchanged

    def form(self) -> tuple[float, int, float, float, bool, float]:
        """`form.RopeOp`'s `yarn` argument."""
        return (self.factor, self.original_context, self.beta_fast, self.beta_slow, self.truncate,
                self.attention_factor)

    def softmax_scale(self, scale: float) -> float:
        """transformers' `yarn_apply_mscale`: scale * m * m, m = yarn_get_mscale(factor,
        mscale_all_dim), where mscale_all_dim is set (nonzero)."""
        if self.mscale_all_dim:
            m = yarn_get_mscale(self.factor, self.mscale_all_dim)
            scale = scale * m * m
        return scale


def yarn_get_mscale(scale: float, mscale: float = 1) -> float:
    """transformers' `yarn_get_mscale` (and `get_mscale` in `_compute_yarn_parameters`)."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def scaled_rope_theta(f: Fields) -> tuple[float, YarnScaling | None]:
    """DeepSeek-V3's rope base and its YaRN scaling (None: the default rope), read as transformers
    5 reads them: `rope_type` or the published `type`; `factor` required; original_max_position_
    embeddings from the config's top level first, then the scaling's, then max_position_embeddings;
    attention_factor as given, else get_mscale(factor, mscale) / get_mscale(factor,
    mscale_all_dim) where both are set (nonzero), else get_mscale(factor); beta_fast, beta_slow
    `or` 32, 1; truncate default true. Other scalings are a one-line error naming the field."""
    if f.raw("rope_parameters", None) is not None:
        rope = f.object("rope_parameters")
        theta = rope.float("rope_theta", f.float("rope_theta", 10000.0))
    else:
        rope = f.object("rope_scaling") if f.raw("rope_scaling", None) is not None else Fields({}, "rope_scaling.")
        theta = f.float("rope_theta", 10000.0)
    key = "rope_type" if rope.raw("rope_type", None) is not None else "type"
    kind = rope.str(key, "default")
    if kind == "default":
        return theta, None
    if kind != "yarn":
        raise ConfigError(f"{rope.name(key)}: '{kind}' is not imported (default, yarn)")
    if rope.float("partial_rotary_factor", 1.0) != 1.0:
        raise ConfigError(f"{rope.name('partial_rotary_factor')}: only 1.0 is imported (rope on all "
                          "qk_rope_head_dim values)")
    factor = rope.float("factor")
    if factor < 1:
        raise ConfigError(f"{rope.name('factor')}: {factor} must be at least 1")
    if f.raw("original_max_position_embeddings", None) is not None:  # transformers gives it priority
        original = f.int("original_max_position_embeddings")
    elif rope.raw("original_max_position_embeddings", None) is not None:
        original = rope.int("original_max_position_embeddings")
    else:
        original = f.int("max_position_embeddings", 4096)
    mscale = rope.float("mscale", 0.0, positive=False)
    mscale_all_dim = rope.float("mscale_all_dim", 0.0, positive=False)
    if rope.raw("attention_factor", None) is not None:
        attention_factor = rope.float("attention_factor")
    elif mscale and mscale_all_dim:
        attention_factor = float(yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim))
    else:
        attention_factor = yarn_get_mscale(factor)
    beta_fast = rope.float("beta_fast", 32.0, positive=False) or 32.0
    beta_slow = rope.float("beta_slow", 1.0, positive=False) or 1.0
    for name, beta in (("beta_fast", beta_fast), ("beta_slow", beta_slow)):
        if beta <= 0:
            raise ConfigError(f"{rope.name(name)}: {beta} must be positive (rotations)")
    truncate = rope.bool("truncate", True)
    return theta, YarnScaling(float(factor), original, float(beta_fast), float(beta_slow), truncate,
                              float(attention_factor), float(mscale_all_dim))


@dataclass(frozen=True)
class Qwen3NextConfig:
    """Qwen3-Next (Gated DeltaNet and gated full attention, a softmax-routed mixture with a
    sigmoid-gated shared expert), as its config.json gives it. Layers count from 0, as
    transformers' `layer_types` and `mlp_only_layers` do."""

    hidden: int
    layers: int
    vocab: int
    rms_eps: float
    tied_embeddings: bool
    linear: tuple[bool, ...]  # per layer: Gated DeltaNet (else full attention)
    # Gated DeltaNet
    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_width: int
    # gated full attention
    heads: int
    kv_heads: int
    head: int
    rotary: int  # rotated values a head: int(head * partial_rotary_factor)
    theta: float
    # MLPs
    dense_width: int
    sparse: tuple[bool, ...]  # per layer: the mixture (else a dense MLP of dense_width)
    experts: int
    top_k: int
    expert_width: int
    shared_width: int
    renormalize: bool


def qwen3_next_config(data: Mapping[str, Any]) -> Qwen3NextConfig:
    """Read and validate a Qwen3-Next config.json (a dict); fields left out take transformers'
    Qwen3NextConfig defaults (full attention every fourth layer, partial_rotary_factor 0.25)."""
    f = config_fields(data, "qwen3_next")
    layers = f.int("num_hidden_layers")
    if f.raw("layer_types", None) is not None:
        kinds = f.strs("layer_types", ("linear_attention", "full_attention"))
        if len(kinds) != layers:
            raise ConfigError(f"layer_types: {len(kinds)} layer types for num_hidden_layers {layers}")
    else:
        interval = f.int("full_attention_interval", 4)
        kinds = tuple("linear_attention" if (n + 1) % interval else "full_attention" for n in range(layers))
    for key in ("attention_bias", "use_sliding_window"):
        if f.bool(key, False):
            raise ConfigError(f"{key}: true is not imported (false)")

    hidden, heads = f.int("hidden_size"), f.int("num_attention_heads")
    kv_heads = f.int("num_key_value_heads", 2)
    if heads % kv_heads:
        raise ConfigError(f"num_key_value_heads: {kv_heads} do not share the {heads} attention heads evenly")
    head = f.int("head_dim", 256)
    key_heads, value_heads = f.int("linear_num_key_heads", 16), f.int("linear_num_value_heads", 32)
    if value_heads % key_heads:
        raise ConfigError(f"linear_num_value_heads: {value_heads} do not share the {key_heads} key heads "
                          "(linear_num_key_heads) evenly")

    # rope: transformers 5 writes one `rope_parameters` object; published configs write rope_theta,
    # partial_rotary_factor and rope_scaling at the top level
    rope = f.object("rope_parameters") if f.raw("rope_parameters", None) is not None else f
    theta = rope.float("rope_theta", f.float("rope_theta", 10000.0))
    factor = rope.float("partial_rotary_factor", f.float("partial_rotary_factor", 0.25))
    kind = rope.str("rope_type", rope.str("type", "default"))
    if rope is f and f.raw("rope_scaling", None) is not None:
        scaling = f.object("rope_scaling")
        kind = scaling.str("rope_type", scaling.str("type", "default"))
        rope = scaling
    if kind != "default":
        raise ConfigError(f"{rope.name('rope_type')}: '{kind}' is not imported (default)")
    rotary = int(head * factor)
    if factor > 1 or rotary < 2 or rotary % 2:
        raise ConfigError(f"{rope.name('partial_rotary_factor')}: {factor} of head_dim {head} gives {rotary} "
                          "rotated values; they must be even, at least 2 and at most the head")

    experts = f.int("num_experts", 512, minimum=0)
    top_k = f.int("num_experts_per_tok", 10)
    if experts and top_k > experts:
        raise ConfigError(f"num_experts_per_tok: {top_k} is more than the {experts} experts (num_experts)")
    step = f.int("decoder_sparse_step", 1)
    dense_only = set(f.ints("mlp_only_layers")) if f.raw("mlp_only_layers", None) is not None else set()
    outside = sorted(n for n in dense_only if not 0 <= n < layers)
    if outside:
        raise ConfigError(f"mlp_only_layers: layers {outside} are outside 0..{layers - 1} (the list is 0-indexed)")
    sparse = tuple(n not in dense_only and experts > 0 and (n + 1) % step == 0 for n in range(layers))

    return Qwen3NextConfig(
        hidden=hidden,
        layers=layers,
        vocab=f.int("vocab_size"),
        rms_eps=f.float("rms_norm_eps", 1e-6),
        tied_embeddings=f.bool("tie_word_embeddings", False),
        linear=tuple(kind == "linear_attention" for kind in kinds),
        key_heads=key_heads,
        value_heads=value_heads,
        key_dim=f.int("linear_key_head_dim", 128),
        value_dim=f.int("linear_value_head_dim", 128),
        conv_width=f.int("linear_conv_kernel_dim", 4, minimum=2),
        heads=heads,
        kv_heads=kv_heads,
        head=head,
        rotary=rotary,
        theta=theta,
        dense_width=f.int("intermediate_size", 5632),
        sparse=sparse,
        experts=experts,
        top_k=top_k,
        expert_width=f.int("moe_intermediate_size", 512),
        shared_width=f.int("shared_expert_intermediate_size", 512, minimum=0),
        renormalize=f.bool("norm_topk_prob", True),
    )
