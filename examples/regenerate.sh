#!/usr/bin/env bash
# Regenerates the example form files from the configs in this folder. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")"

# Kimi Linear 48B-A3B, its first four layers: three KDA layers and one MLA layer.
lanec import kimi-linear-48b-a3b.config.json -o kimi-linear-small.mlir --layers 4 --batch 1
# The KDA-only variant for the KdaSplit work: the first three (KDA) layers, each with a dense MLP.
lanec import kimi-linear-48b-a3b.config.json -o kimi-linear-kda.mlir --layers 3 --kda-only --dense-mlp 9216 --batch 1
# The same architecture at toy sizes, all four layers: fast on the CPU interpreter.
lanec import kimi-linear-tiny.config.json -o kimi-linear-tiny.mlir
# A dense Llama-style stack (paged GQA attention, SwiGLU MLP): the first example for the kernels.
python -m lanec.models.dense -o dense-small.mlir --batch 1
# The same stack with Q8_0 checkpoint rows (every projection and the lm head; the embed table and the
# norms stay bf16), recorded under quantized numerics: its products read int8 activations, quantized in their
# producers' epilogues where a kernel can (fuse_quant: 107.2 against 112.5 us a step unfused, bench/RESULTS.md).
sed -E 's/(name = "[^"]*(_proj|lm_head)\.weight", format = )"bf16"/\1"q8_0"/' dense-small.mlir \
  | sed '1s/^builtin.module {/builtin.module attributes {lane.shim = {numerics = "quantized", words = 1 : i64, fuse_quant = true, batch_products = false}} {/' \
  > dense-small-q8.mlir
