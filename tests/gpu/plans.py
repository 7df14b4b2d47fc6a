"""Whole plans for the GPU: shipped examples, the dense example at other batches (and speculative
tokens), and imports of Kimi Linear (its config, or the config with another KDA head count) and
of the other families' published configs (`Imported`: DeepSeek-V3, Llama-3.1-8B, sized down) compiled here by `build()` into build/plans/, run there by tests/gpu/test_plans.py with `--check`
(every output and state against the interpreter; the dense plans' KV caches included).

    python tests/gpu/plans.py [NAME ...]      # here, before carrying build/ to the GPU machine
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "plans"
KIMI = ROOT / "examples" / "kimi-linear-48b-a3b.config.json"
# The KDA-only variant of Kimi Linear (dense MLPs in place of the mixtures): two KDA layers
# keep the GPU check quick while exercising the layer-to-layer chain.
KDA = ["--kda-only", "--dense-mlp", "9216", "--layers", "2"]
# Qwen3-Next-80B-A3B's first four layers: three Gated DeltaNet layers (part, conv, kda_gate,
# delta_rule and head_norm launches: no KdaSplit) and the gated attention, each with its mixture
QWEN = ROOT / "examples" / "qwen3-next-80b-a3b.config.json"



class Kimi(NamedTuple):
    """A plan's form: `lanec import` of Kimi Linear's config with `arguments`; with `heads`, the
    config's KDA head count changed to it (hidden = heads x the head size, as the real model's
    32 x 128 KDA width; every part of the merged q, k, v, f_a, b, g_a product is then read in
    place at another alignment of its row)."""

    arguments: list[str]
    heads: int | None = None
    changes: dict | None = None  # other top-level config fields (e.g. the MLA's qk_nope_head_dim)
    head_size: int | None = None  # the KDA head size (64: hold-kda splits the kda back into its chain)
    compile: tuple[str, ...] = ()  # `lanec compile` options (e.g. --grouped-experts)
    q8: bool = False  # every projection and the lm head as Q8_0 rows under quantized numerics (`q8_rows`)


class Qwen(NamedTuple):
    """A plan's form: `lanec import` of Qwen3-Next's config with `arguments`; with `q8`, its
    attention and linear-attention projections and lm head as Q8_0 checkpoint rows under quantized
    numerics (`q8_rows`), compiled with `compile`."""

    arguments: list[str]
    q8: bool = False
    compile: tuple[str, ...] = ()


# the projections of the attention layers (softmax or linear) and the lm head; with the experts', every
# projection (the mixtures and the latent attention's kv_b read their q8_0 rows widened to bf16)
Q8_ROWS = re.compile(r'(name = "(?:[^"]*\.(?:self_attn|linear_attn)\.[^"]*_proj|lm_head)\.weight", format = )"bf16"')
Q8_ALL_ROWS = re.compile(r'(name = "[^"]*(?:_proj|lm_head|\.w[123])\.weight", format = )"bf16"')  # w1-3: Kimi's experts
QUANTIZED = ('builtin.module attributes {lane.shim = {numerics = "quantized", words = 1 : i64, fuse_quant = false, '
             'batch_products = false}} {')


def q8_rows(form: str, experts: bool = False) -> str:
    """`form` with its attention projections and lm head (`experts`: every projection) as Q8_0
    rows, under quantized numerics (as examples/regenerate.sh makes dense-small-q8.mlir)."""
    rows = (Q8_ALL_ROWS if experts else Q8_ROWS).sub(r'\1"q8_0"', form)
    if not rows.startswith("builtin.module {"):
        raise ValueError("a form whose module already carries attributes")
    return QUANTIZED + rows[len("builtin.module {"):]


def kimi_config(heads: int | None = None, head_size: int | None = None, **changes) -> dict:
    """Kimi Linear's config, with `heads` KDA heads (and the hidden size that goes with them), KDA
    heads of `head_size` and any other top-level `changes` (e.g. vocab_size)."""
    config = json.loads(KIMI.read_text())
    if head_size is not None:
        config["linear_attn_config"]["head_dim"] = head_size
    if heads is not None:
        config["linear_attn_config"]["num_heads"] = heads
        config["hidden_size"] = heads * config["linear_attn_config"]["head_dim"]
    config.update(changes)
    return config


class Dense(NamedTuple):
    """A plan's form: `python -m lanec.models.dense` with `arguments` (the dense example's shape)."""

    arguments: list[str]


class Imported(NamedTuple):
    """A plan's form: `lanec import` of another family's published config (`config`, a file of
    examples/) with `arguments`; with `q8`, every projection and the lm head as Q8_0 rows under
    quantized numerics (`q8_rows`), compiled with `compile`."""

    config: str
    arguments: list[str]
    q8: bool = False
    compile: tuple[str, ...] = ()


class Shipped(NamedTuple):
    """A plan's form: a shipped form file of examples/ (`form`, its stem), compiled with `compile`."""

    form: str
    compile: tuple[str, ...] = ()


# name -> how its form is made (None: a shipped form file)
PLANS: dict[str, Kimi | Dense | Qwen | Imported | Shipped | None] = {
    "dense-small": None,
    # Q8_0 rows under quantized numerics (the form's lane.shim): quantize, q8_gemv, q8_gated_gemv;
    # then two words a value, with fuse-quant's epilogues (still standalone quantize launches)
    "dense-small-q8": None,
    "dense-small-q8-w2-fused": Shipped("dense-small-q8", ("--words", "2", "--fuse-quant")),
    # the quantizes each a launch of its own (the shipped example quantizes in its producers' epilogues)
    "dense-small-q8-unfused": Shipped("dense-small-q8", ("--no-fuse-quant",)),
    "kimi-linear-small": None,  # KDA, MLA and the mixture: the seed's model, whole
    # the first MLA layer (layer 4) behind three KDA layers, dense MLPs: the latent attention alone
    "kimi-mla-b3": Kimi(["--layers", "4", "--dense-mlp", "9216", "--batch", "3"]),
    "kimi-mla-spec4-b8": Kimi(["--layers", "4", "--dense-mlp", "9216", "--batch", "8", "--spec-tokens", "4"]),
    # the MLA layer with a nope part of 80: held back from the absorbed path (not whole 32-value
    # blocks), run expanded (latent_expand, then expanded_attention)
    "kimi-mla-expanded-b3": Kimi(["--layers", "4", "--dense-mlp", "9216", "--batch", "3", "--spec-tokens", "2"],
                                 changes={"qk_nope_head_dim": 80}),
    # a KDA layer, then the first mixture (layer 1: 256 experts, top 8, the shared expert folded)
    # the whole model's first four layers (three KDA, one MLA, each with its mixture but the first
    # dense one) at the batches users serve and with speculative tokens
    "kimi-b8": Kimi(["--layers", "4", "--batch", "8"]),
    "kimi-b64": Kimi(["--layers", "4", "--batch", "64"]),
    "kimi-spec3-b2": Kimi(["--layers", "4", "--batch", "2", "--spec-tokens", "3"]),
    "kimi-moe-b8": Kimi(["--kda-only", "--layers", "2", "--batch", "8"]),
    "kimi-moe-b64": Kimi(["--kda-only", "--layers", "2", "--batch", "64"]),
    # the same mixtures on the grouped experts' path (rows grouped by expert, tensor cores)
    "kimi-moe-grouped-b64": Kimi(["--kda-only", "--layers", "2", "--batch", "64"], compile=("--grouped-experts",)),
    "kimi-moe-spec3-b2": Kimi(["--kda-only", "--layers", "2", "--batch", "2", "--spec-tokens", "3"]),
    # every projection Q8_0 (16 experts to keep the host's widening small), two words, fuse-quant:
    # KdaSplit's f_b, the latent attention's kv_b and the experts widened to bf16 at load, the other
    # products on q8_gemv
    "kimi-b3-q8": Kimi(["--layers", "4", "--batch", "3"], changes={"num_experts": 16}, q8=True,
                       compile=("--words", "2", "--fuse-quant")),
    "dense-small-b8": Dense(["--batch", "8"]),
    "dense-small-b64": Dense(["--batch", "64"]),
    "dense-small-b256": Dense(["--batch", "256"]),  # 1 MiB all-reduces at TP 2: the one-shot's limit
    "dense-small-spec4-b8": Dense(["--batch", "8", "--spec-tokens", "4"]),
    "kimi-kda-b1": Kimi([*KDA, "--batch", "1"]),
    # the same step with each norm before a gemv a launch of its own (fold-norm-into-gemv off; on by default at
    # 1-3 rows, as in kimi-kda-b1), and at 3 rows (the prologue's limit) behind speculative tokens
    "kimi-kda-b1-no-fold-norms": Kimi([*KDA, "--batch", "1"], compile=("--no-fold-norms",)),
    "kimi-kda-spec2-b1-no-fold-norms": Kimi([*KDA, "--batch", "1", "--spec-tokens", "2"], compile=("--no-fold-norms",)),
    # the argmax in the lm head's epilogue (fold-argmax-into-gemv), at 1 row and behind 2 speculative tokens
    "kimi-kda-b1-fold-argmax": Kimi([*KDA, "--batch", "1"], compile=("--fold-argmax",)),
    "kimi-kda-spec2-b1-fold-argmax": Kimi([*KDA, "--batch", "1", "--spec-tokens", "2"], compile=("--fold-argmax",)),
    # g_b's product a launch of its own (fold-gate-product off; on by default at one row, as in kimi-kda-b1)
    "kimi-kda-b1-no-fold-gate": Kimi([*KDA, "--batch", "1"], compile=("--no-fold-gate",)),
    # the norm before each mixture a launch of its own (fold-norm-into-router off; on by default, as in kimi-b8)
    "kimi-b8-no-fold-router-norms": Kimi(["--layers", "4", "--batch", "8"], compile=("--no-fold-router-norms",)),
    # a few requests: where fold-gate-product's row limit (KDA_GATE_FOLD_ROWS) was measured
    "kimi-kda-b4": Kimi([*KDA, "--batch", "4"]),
    "kimi-kda-b8": Kimi([*KDA, "--batch", "8"]),
    "kimi-kda-b64": Kimi([*KDA, "--batch", "64"]),
    "kimi-kda-b256": Kimi([*KDA, "--batch", "256"]),
    "kimi-kda-spec3": Kimi([*KDA, "--batch", "4", "--spec-tokens", "3"]),
    # head counts whose merged product's parts are not all whole 16-byte vectors (b: one a head)
    "kimi-kda-h12-b5": Kimi([*KDA, "--batch", "5"], heads=12),
    "kimi-kda-h6-b5": Kimi([*KDA, "--batch", "5"], heads=6),
    "kimi-kda-h3-spec5-b33": Kimi([*KDA, "--batch", "33", "--spec-tokens", "5"], heads=3),
    # KDA held back (hold-kda) into its chain: conv, head_norm (l2norm), kda_gate, delta_rule and
    # head_norm (the gated norm) launches; at head size 64, and at 12 speculative tokens (KdaSplit: 8)
    "kimi-kda-h64-b1": Kimi([*KDA, "--batch", "1"], head_size=64),
    "kimi-kda-h64-spec3-b5": Kimi([*KDA, "--batch", "5", "--spec-tokens", "3"], head_size=64),
    "kimi-kda-spec12-b2": Kimi([*KDA, "--batch", "2", "--spec-tokens", "12"]),
    "qwen-next-b1": Qwen(["--layers", "4"]),
    "qwen-next-spec3-b5": Qwen(["--layers", "4", "--batch", "5", "--spec-tokens", "3"]),
    # Q8_0 projections, two words, fuse-quant: the gated norm before each linear attention's out_proj
    # quantizes in head_norm's epilogue
    "qwen-next-b1-q8-fused": Qwen(["--layers", "4"], q8=True, compile=("--words", "2", "--fuse-quant")),
    # DeepSeek-V3's first four layers (three dense, then the first mixture of 256 experts: about 30 GB
    # of seeded bf16 weights, 60 GB of fp32 sources on the host): YaRN rope on the interleaved rope part
    "deepseek-v3-b2": Imported("deepseek-v3.config.json", ["--layers", "4", "--batch", "2"]),
    # Llama-3.1-8B's first two layers: GQA with llama3 rope scaling
    "llama-3.1-8b-b3": Imported("llama-3.1-8b.config.json", ["--layers", "2", "--batch", "3"]),
    # and at 40 rows with every projection Q8_0 under fuse-quant: each product on q8_gemm_tc (int8
    # tensor cores), each gated pair two of them and a SwiGLU that quantizes in its epilogue
    "llama-3.1-8b-b40-q8-fused": Imported("llama-3.1-8b.config.json", ["--layers", "2", "--batch", "40"], q8=True,
                                          compile=("--fuse-quant",)),
}


# The whole Kimi-Linear-48B-A3B at its real size (27 layers, about 98 GB of bf16 weights): run only
# with --gpu-seeding (the host keeps the seeded weights lazy; made whole on the host they would not
# fit), by tests/gpu/session.sh's `real` phase, never by test_plans.py
REAL_PLANS: dict[str, Kimi] = {
    "kimi-full-b1": Kimi([]),
    "kimi-full-b64": Kimi(["--batch", "64"]),
    "kimi-full-spec3-b8": Kimi(["--batch", "8", "--spec-tokens", "3"]),
}

# bench/model.py's plans: the whole model at batch 1, 8, 64 and 256, and 3 speculative tokens at
# batch 8, each at a context of 1k and 16k positions (64-row pages: the page table holds just that
# context, so the latent attention's recorded traffic is the context's rows); --gpu-seeding only
MODEL_CONTEXTS = (1024, 16384)
MODEL_PLANS: dict[str, Kimi] = {
    f"kimi-full-{shape}-c{context // 1024}k": Kimi([*arguments, "--context-pages", str(context // 64)])
    for shape, arguments in (("b1", []), ("b8", ["--batch", "8"]), ("b64", ["--batch", "64"]),
                             ("b256", ["--batch", "256"]), ("spec3-b8", ["--batch", "8", "--spec-tokens", "3"]))
    for context in MODEL_CONTEXTS
}
# batch 1 with each norm before a GEMV a launch of its own (fold-norm-into-gemv off, on by default at 1-3 rows):
# the fold's gain at real size, the row beside kimi-full-b1-c1k
MODEL_PLANS["kimi-full-b1-c1k-no-fold-norms"] = Kimi(["--context-pages", "16"], compile=("--no-fold-norms",))
# and with the argmax in the lm head's epilogue (fold-argmax-into-gemv): that fold's gain
MODEL_PLANS["kimi-full-b1-c1k-fold-argmax"] = Kimi(["--context-pages", "16"], compile=("--fold-argmax",))
# and with each KDA layer's output gate product a launch of its own (fold-gate-product off, on by default at one
# row): the fold's gain
MODEL_PLANS["kimi-full-b1-c1k-no-fold-gate"] = Kimi(["--context-pages", "16"], compile=("--no-fold-gate",))
# and without the norm before each mixture in its router's prologue (fold-norm-into-router, on by default), at
# batch 1 and 8: the fold's gain
MODEL_PLANS["kimi-full-b1-c1k-no-fold-router-norms"] = Kimi(["--context-pages", "16"],
                                                            compile=("--no-fold-router-norms",))
MODEL_PLANS["kimi-full-b8-c1k-no-fold-router-norms"] = Kimi(["--batch", "8", "--context-pages", "16"],
                                                            compile=("--no-fold-router-norms",))


# Tensor parallel (tests/gpu/test_tp_nccl.py, bench/tp.py): a plan of PLANS compiled from the same form
# with --tp N (name -> (the one-GPU plan, ranks)); build the one-GPU plan first (its form is reused)
TP_PLANS: dict[str, tuple[str, int]] = {
    "dense-small-tp2": ("dense-small", 2),
    "kimi-kda-b1-tp2": ("kimi-kda-b1", 2),
    "dense-small-b64-tp2": ("dense-small-b64", 2),  # 256 KB all-reduces
    "dense-small-b256-tp2": ("dense-small-b256", 2),  # 1 MiB: the one-shot's limit, measured against NCCL's
    # 4 and 8 ranks: run where the machine has the GPUs (test_tp_nccl.py and bench/tp.py skip them elsewhere)
    "dense-small-tp4": ("dense-small", 4),
    "kimi-kda-b1-tp4": ("kimi-kda-b1", 4),
    "dense-small-tp8": ("dense-small", 8),
    "kimi-kda-b1-tp8": ("kimi-kda-b1", 8),
}
# bench/tp.py --model: the real-size Kimi-Linear-48B-A3B (46.5 GiB of weights a rank at TP 2) and
# DeepSeek-V3's first four layers, each rank's parts of the seeded weights made on its GPU; timed,
# never --check'd by test_tp_nccl.py (the interpreter's whole-model reference is the real-size
# check's, one GPU: session.sh real)
TP_MODEL_PLANS: dict[str, tuple[str, int]] = {
    "kimi-full-b1-c1k-tp2": ("kimi-full-b1-c1k", 2),
    "kimi-full-b8-c1k-tp2": ("kimi-full-b8-c1k", 2),
    "deepseek-v3-b2-tp2": ("deepseek-v3-b2", 2),
    "kimi-full-b1-c1k-tp4": ("kimi-full-b1-c1k", 4),
    "kimi-full-b1-c1k-tp8": ("kimi-full-b1-c1k", 8),
    "deepseek-v3-b2-tp4": ("deepseek-v3-b2", 4),
    "deepseek-v3-b2-tp8": ("deepseek-v3-b2", 8),
}


def lanec(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "lanec.cli", *args], check=True, cwd=ROOT)


def build(names: list[str] | None = None) -> list[Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    built = []
    every = {**PLANS, **REAL_PLANS, **MODEL_PLANS}
    for name in names or list(every):
        if name in TP_PLANS or name in TP_MODEL_PLANS:
            base, ranks = {**TP_PLANS, **TP_MODEL_PLANS}[name]
            source = ROOT / "examples" / f"{base}.mlir" if every[base] is None else OUT / f"{base}.mlir"
            lanec("compile", "--tp", str(ranks), str(source), "-o", str(OUT / f"{name}.plan"))
            built.append(OUT / f"{name}.plan")
            continue
        made = every[name]
        if made is None or isinstance(made, Shipped):
            source = ROOT / "examples" / f"{name if made is None else made.form}.mlir"
        elif isinstance(made, Dense):
            source = OUT / f"{name}.mlir"
            subprocess.run([sys.executable, "-m", "lanec.models.dense", *made.arguments, "-o", str(source)],
                           check=True, cwd=ROOT)
        elif isinstance(made, Qwen):
            source = OUT / f"{name}.mlir"
            lanec("import", str(QWEN), *made.arguments, "-o", str(source))
            if made.q8:
                source.write_text(q8_rows(source.read_text()))
        elif isinstance(made, Imported):
            source = OUT / f"{name}.mlir"
            lanec("import", str(ROOT / "examples" / made.config), *made.arguments, "-o", str(source))
            if made.q8:
                source.write_text(q8_rows(source.read_text(), experts=True))
        else:
            config = KIMI
            if made.heads is not None or made.head_size is not None or made.changes:
                config = OUT / f"{name}.config.json"
                config.write_text(json.dumps(kimi_config(made.heads, made.head_size, **(made.changes or {})),
                                             indent=1) + "\n")
            source = OUT / f"{name}.mlir"
            lanec("import", str(config), *made.arguments, "-o", str(source))
            if made.q8:
                source.write_text(q8_rows(source.read_text(), experts=True))
        target = OUT / f"{name}.plan"
        lanec("compile", *getattr(made, "compile", ()), str(source), "-o", str(target))
        built.append(target)
    return built


if __name__ == "__main__":
    for path in build(sys.argv[1:] or None):
        print(path)
