// Every form op's verifier, at least one bad case each, and the parser's errors: each message is checked.
// RUN: lanec opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// CHECK: Operation does not verify: batch 0: at least one request
form.step batch 0 tokens 1 {
  form.return
}

// -----

// CHECK: Operation does not verify: 'form.return' expects parent op 'form.step'
form.return

// -----

// CHECK: Operation does not verify: the tokens input has 2 rows; the step has 1
form.step batch 1 tokens 1 {
  %tokens = form.input {role = "tokens"} : tensor<2xi32>
  form.return
}

// -----

// CHECK: Operation does not verify: the slot table has 1 slots a request; a step of 2 tokens needs 2
form.step batch 2 tokens 2 {
  %slots = form.input {role = "slots"} : tensor<2xi32>
  form.return
}

// -----

// CHECK: Operation does not verify: the accepted input has 1 requests; the step has 2
form.step batch 2 tokens 2 {
  %accepted = form.input {role = "accepted"} : tensor<1xi32>
  form.return
}

// -----

// CHECK: Operation does not verify: q8_0 rows of 48 values are not whole 32-value blocks
form.step batch 1 tokens 1 {
  %w = form.weight {name = "w", format = "q8_0"} : tensor<64x48xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: the recurrent state is f32
form.step batch 1 tokens 1 {
  %s = form.state {name = "s", kind = "recurrent"} : tensor<4x2x16x16xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: embed result must be [rows, hidden]
form.step batch 1 tokens 1 {
  %tokens = form.input {role = "tokens"} : tensor<1xi32>
  %table = form.weight {name = "embed", format = "bf16"} : tensor<32x16xbf16>
  %h = form.embed %tokens, %table : (tensor<1xi32>, tensor<32x16xbf16>) -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: weight 0 has rows of 48 inputs; the activation gives 64
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %w = form.weight {name = "w", format = "bf16"} : tensor<32x48xbf16>
  %y = form.product %x, %w : (tensor<1x64xbf16>, tensor<32x48xbf16>) -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: part [32, 56) does not fit a unit of 48
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x96xbf16>
  %w = form.weight {name = "w", format = "bf16"} : tensor<128x24xbf16>
  %y = form.product %x, %w {heads = 2 : i64, unit = 48 : i64, offset = 32 : i64, length = 24 : i64} : (tensor<1x96xbf16>, tensor<128x24xbf16>) -> tensor<1x128xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: gate [96, 64] and up [64, 64] must have the same shape
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %g = form.weight {name = "g", format = "bf16"} : tensor<96x64xbf16>
  %u = form.weight {name = "u", format = "bf16"} : tensor<64x64xbf16>
  %y = form.gated_product %x, %g, %u : (tensor<1x64xbf16>, tensor<96x64xbf16>, tensor<64x64xbf16>) -> tensor<1x96xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: a gated pair's gate must be a [rows, width] tensor, got [2, 32, 64]
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %g = form.weight {name = "g", format = "bf16"} : tensor<2x32x64xbf16>
  %y = form.gated_product %x, %g, %g : (tensor<1x64xbf16>, tensor<2x32x64xbf16>, tensor<2x32x64xbf16>) -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: part [40, 56) does not fit a unit of 48
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x96xbf16>
  %y = form.part %x {heads = 2 : i64, unit = 48 : i64, offset = 40 : i64, length = 16 : i64} : (tensor<1x96xbf16>) -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: the norm weight must be [64], got [32]
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %w = form.weight {name = "w", format = "bf16"} : tensor<32xbf16>
  %y = form.norm %x, %w {eps = 1.0e-06 : f64} : (tensor<1x64xbf16>, tensor<32xbf16>) -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: a quantizing epilogue writes an i8 result
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %w = form.weight {name = "w", format = "bf16"} : tensor<64xbf16>
  %y = form.norm %x, %w {eps = 1.0e-06 : f64, quantize = 1 : i64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: form.add operands disagree: [1, 64] and [1, 32]
form.step batch 1 tokens 1 {
  %a = form.weight {name = "a", format = "bf16"} : tensor<1x64xbf16>
  %b = form.weight {name = "b", format = "bf16"} : tensor<1x32xbf16>
  %y = form.add %a, %b : (tensor<1x64xbf16>, tensor<1x32xbf16>) -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: form.mul result must be [1, 64]
form.step batch 1 tokens 1 {
  %a = form.weight {name = "a", format = "bf16"} : tensor<1x64xbf16>
  %y = form.mul %a, %a : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: quantized width 48 is not whole 32-value blocks
form.step batch 1 tokens 1 {
  %a = form.weight {name = "a", format = "bf16"} : tensor<1x48xbf16>
  %y = form.swiglu %a, %a {quantize = 1 : i64} : (tensor<1x48xbf16>, tensor<1x48xbf16>) -> tensor<1x48xi8>
  form.return
}

// -----

// CHECK: Operation does not verify: form.silu result must be [1, 64]
form.step batch 1 tokens 1 {
  %a = form.weight {name = "a", format = "bf16"} : tensor<1x64xbf16>
  %y = form.silu %a : (tensor<1x64xbf16>) -> tensor<2x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: quantize epilogue of 3 words: one or two int8 words a value
form.step batch 1 tokens 1 {
  %a = form.weight {name = "a", format = "bf16"} : tensor<1x64xbf16>
  %y = form.sigmoid %a {quantize = 3 : i64} : (tensor<1x64xbf16>) -> tensor<1x64xi8>
  form.return
}

// -----

// CHECK: Operation does not verify: l2norm: width 64 does not split into 3 heads
form.step batch 1 tokens 1 {
  %a = form.weight {name = "a", format = "bf16"} : tensor<1x64xbf16>
  %y = form.l2norm %a {heads = 3 : i64, eps = 1.0e-06 : f64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: rotary 15: even, at most the head size 32
form.step batch 1 tokens 1 {
  %positions = form.input {role = "positions"} : tensor<1xi32>
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %y = form.rope %x, %positions {heads = 2 : i64, rotary = 15 : i64, theta = 1.0e+04 : f64} : (tensor<1x64xbf16>, tensor<1xi32>) -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: conv width 4 over 1 tokens keeps 3 taps of state; the state has 4
form.step batch 1 tokens 1 {
  %slots = form.input {role = "slots"} : tensor<1xi32>
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x32xbf16>
  %w = form.weight {name = "w", format = "bf16"} : tensor<32x4xbf16>
  %s = form.state {name = "s", kind = "conv"} : tensor<4x32x4xbf16>
  %y = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu"} : tensor<1x32xbf16>, tensor<4x32x4xbf16>, tensor<32x4xbf16>, tensor<1xi32> -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: conv: a speculative step (2 tokens) needs accepted counts
form.step batch 1 tokens 2 {
  %slots = form.input {role = "slots"} : tensor<1x2xi32>
  %x = form.weight {name = "x", format = "bf16"} : tensor<2x32xbf16>
  %w = form.weight {name = "w", format = "bf16"} : tensor<32x4xbf16>
  %s = form.state {name = "s", kind = "conv"} : tensor<4x32x4xbf16>
  %y = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu"} : tensor<2x32xbf16>, tensor<4x32x4xbf16>, tensor<32x4xbf16>, tensor<1x2xi32> -> tensor<2x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: conv: accepted counts are [batch] of i32
form.step batch 1 tokens 2 {
  %slots = form.input {role = "slots"} : tensor<1x2xi32>
  %accepted = form.weight {name = "accepted", format = "bf16"} : tensor<1xbf16>
  %x = form.weight {name = "x", format = "bf16"} : tensor<2x32xbf16>
  %w = form.weight {name = "w", format = "bf16"} : tensor<32x4xbf16>
  %s = form.state {name = "s", kind = "conv"} : tensor<4x32x4xbf16>
  %y = form.conv %x, %s, %w, %slots accepted %accepted : tensor<1xbf16> {offset = 0 : i64, activation = "silu"} : tensor<2x32xbf16>, tensor<4x32x4xbf16>, tensor<32x4xbf16>, tensor<1x2xi32> -> tensor<2x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: the lower_bound form needs lower_bound, and only it
form.step batch 1 tokens 1 {
  %g = form.weight {name = "g", format = "bf16"} : tensor<1x32xbf16>
  %alog = form.weight {name = "A_log", format = "bf16"} : tensor<2xf32>
  %dtb = form.weight {name = "dt_bias", format = "bf16"} : tensor<32xf32>
  %y = form.kda_gate %g, %alog, %dtb {heads = 2 : i64, form = "lower_bound"} : (tensor<1x32xbf16>, tensor<2xf32>, tensor<32xf32>) -> tensor<1x32xf32>
  form.return
}

// -----

// CHECK: Operation does not verify: the state must be [slot, 2, 16, 16], got [4, 2, 16, 32]
form.step batch 1 tokens 1 {
  %slots = form.input {role = "slots"} : tensor<1xi32>
  %q = form.weight {name = "q", format = "bf16"} : tensor<1x32xbf16>
  %decay = form.weight {name = "decay", format = "bf16"} : tensor<1x32xf32>
  %beta = form.weight {name = "beta", format = "bf16"} : tensor<1x2xbf16>
  %s = form.state {name = "s", kind = "recurrent"} : tensor<4x2x16x32xf32>
  %y = form.delta_rule %q, %q, %q, %decay, %beta, %s, %slots {heads = 2 : i64, key_heads = 2 : i64, scale = 0.25 : f64} : (tensor<1x32xbf16>, tensor<1x32xbf16>, tensor<1x32xbf16>, tensor<1x32xf32>, tensor<1x2xbf16>, tensor<4x2x16x32xf32>, tensor<1xi32>) -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: the norm weight must be [16] (one head)
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x32xbf16>
  %w = form.weight {name = "w", format = "bf16"} : tensor<32xbf16>
  %y = form.norm_gated %x, %x, %w {heads = 2 : i64, eps = 1.0e-05 : f64, activation = "sigmoid"} : (tensor<1x32xbf16>, tensor<1x32xbf16>, tensor<32xbf16>) -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: kda: the conv state must be [slot, 96, 3], got [4, 96, 4]
form.step batch 1 tokens 1 {
  %slots = form.input {role = "slots"} : tensor<1xi32>
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x32xbf16>
  %wc = form.weight {name = "conv1d", format = "bf16"} : tensor<32x4xbf16>
  %fa = form.weight {name = "f_a", format = "bf16"} : tensor<1x8xbf16>
  %fb = form.weight {name = "f_b", format = "bf16"} : tensor<32x8xbf16>
  %alog = form.weight {name = "A_log", format = "bf16"} : tensor<2xf32>
  %dtb = form.weight {name = "dt_bias", format = "bf16"} : tensor<32xf32>
  %beta = form.weight {name = "beta", format = "bf16"} : tensor<1x2xbf16>
  %wn = form.weight {name = "o_norm", format = "bf16"} : tensor<16xbf16>
  %conv = form.state {name = "conv", kind = "conv"} : tensor<4x96x4xbf16>
  %rec = form.state {name = "rec", kind = "recurrent"} : tensor<4x2x16x16xf32>
  %y = form.kda qkv(%x, %x, %x) conv(%wc, %wc, %wc, %conv) gate(%fa, %fb, %alog, %dtb) beta %beta out_gate %x norm %wn state %rec slots %slots {heads = 2 : i64, form = "softplus", scale = 0.25 : f64, l2_eps = 1.0e-06 : f64, eps = 1.0e-05 : f64} : (tensor<1x32xbf16>, tensor<1x32xbf16>, tensor<1x32xbf16>) conv(tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<4x96x4xbf16>) gate(tensor<1x8xbf16>, tensor<32x8xbf16>, tensor<2xf32>, tensor<32xf32>) beta tensor<1x2xbf16> out_gate tensor<1x32xbf16> norm tensor<16xbf16> state tensor<4x2x16x16xf32> slots tensor<1xi32> -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: kda: each conv bias must be [32]
form.step batch 1 tokens 1 {
  %slots = form.input {role = "slots"} : tensor<1xi32>
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x32xbf16>
  %wc = form.weight {name = "conv1d", format = "bf16"} : tensor<32x4xbf16>
  %fa = form.weight {name = "f_a", format = "bf16"} : tensor<1x8xbf16>
  %fb = form.weight {name = "f_b", format = "bf16"} : tensor<32x8xbf16>
  %alog = form.weight {name = "A_log", format = "bf16"} : tensor<2xf32>
  %dtb = form.weight {name = "dt_bias", format = "bf16"} : tensor<32xf32>
  %beta = form.weight {name = "beta", format = "bf16"} : tensor<1x2xbf16>
  %wn = form.weight {name = "o_norm", format = "bf16"} : tensor<16xbf16>
  %conv = form.state {name = "conv", kind = "conv"} : tensor<4x96x3xbf16>
  %rec = form.state {name = "rec", kind = "recurrent"} : tensor<4x2x16x16xf32>
  %y = form.kda qkv(%x, %x, %x) conv(%wc, %wc, %wc, %conv) gate(%fa, %fb, %alog, %dtb) beta %beta out_gate %x norm %wn state %rec slots %slots bias(%fb, %fb, %fb : tensor<32x8xbf16>, tensor<32x8xbf16>, tensor<32x8xbf16>) {heads = 2 : i64, form = "softplus", scale = 0.25 : f64, l2_eps = 1.0e-06 : f64, eps = 1.0e-05 : f64} : (tensor<1x32xbf16>, tensor<1x32xbf16>, tensor<1x32xbf16>) conv(tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<4x96x3xbf16>) gate(tensor<1x8xbf16>, tensor<32x8xbf16>, tensor<2xf32>, tensor<32xf32>) beta tensor<1x2xbf16> out_gate tensor<1x32xbf16> norm tensor<16xbf16> state tensor<4x2x16x16xf32> slots tensor<1xi32> -> tensor<1x32xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: 3 query heads do not share 2 KV heads evenly
form.step batch 1 tokens 1 {
  %positions = form.input {role = "positions"} : tensor<1xi32>
  %pages = form.input {role = "pages"} : tensor<1x4xi32>
  %q = form.weight {name = "q", format = "bf16"} : tensor<1x96xbf16>
  %kv = form.weight {name = "kv", format = "bf16"} : tensor<1x64xbf16>
  %cache = form.state {name = "cache", kind = "kv"} : tensor<8x16x2x32xbf16>
  %y = form.attention %q, %kv, %kv, %cache, %cache, %pages, %positions {heads = 3 : i64, kv_heads = 2 : i64, scale = 0.125 : f64} : (tensor<1x96xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<8x16x2x32xbf16>, tensor<8x16x2x32xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x96xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: attention: q must be a [rows, width] tensor, got [96]
form.step batch 1 tokens 1 {
  %positions = form.input {role = "positions"} : tensor<1xi32>
  %pages = form.input {role = "pages"} : tensor<1x4xi32>
  %q = form.weight {name = "q", format = "bf16"} : tensor<96xbf16>
  %kv = form.weight {name = "kv", format = "bf16"} : tensor<1x64xbf16>
  %cache = form.state {name = "cache", kind = "kv"} : tensor<8x16x2x32xbf16>
  %y = form.attention %q, %kv, %kv, %cache, %cache, %pages, %positions {heads = 2 : i64, kv_heads = 2 : i64, scale = 0.125 : f64} : (tensor<96xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<8x16x2x32xbf16>, tensor<8x16x2x32xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: the latent cache rows are 64 + 16 = 80 wide, got [4, 16, 64]
form.step batch 1 tokens 1 {
  %positions = form.input {role = "positions"} : tensor<1xi32>
  %pages = form.input {role = "pages"} : tensor<1x4xi32>
  %qr = form.weight {name = "qr", format = "bf16"} : tensor<1x96xbf16>
  %latent = form.weight {name = "latent", format = "bf16"} : tensor<1x64xbf16>
  %krope = form.weight {name = "k_rope", format = "bf16"} : tensor<1x16xbf16>
  %kvb = form.weight {name = "kv_b", format = "bf16"} : tensor<128x64xbf16>
  %cache = form.state {name = "cache", kind = "latent"} : tensor<4x16x64xbf16>
  %y = form.latent_attention %qr, %latent, %krope, %cache, %kvb, %pages, %positions {heads = 2 : i64, nope = 32 : i64, rope = 16 : i64, lora = 64 : i64, v = 32 : i64, scale = 0.125 : f64} : (tensor<1x96xbf16>, tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<4x16x64xbf16>, tensor<128x64xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: top_k 9: between 1 and the 8 experts
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %router = form.weight {name = "router", format = "bf16"} : tensor<8x64xbf16>
  %eg = form.weight {name = "eg", format = "bf16"} : tensor<8x32x64xbf16>
  %ed = form.weight {name = "ed", format = "bf16"} : tensor<8x64x32xbf16>
  %y = form.mixture %x, %router, %eg, %eg, %ed {top_k = 9 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.0 : f64} : tensor<1x64xbf16>, tensor<8x64xbf16>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16> -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: a shared expert is gate, up, down (and an optional gate row)
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %router = form.weight {name = "router", format = "bf16"} : tensor<8x64xbf16>
  %eg = form.weight {name = "eg", format = "bf16"} : tensor<8x32x64xbf16>
  %ed = form.weight {name = "ed", format = "bf16"} : tensor<8x64x32xbf16>
  %sg = form.weight {name = "sg", format = "bf16"} : tensor<48x64xbf16>
  %y = form.mixture %x, %router, %eg, %eg, %ed shared(%sg, %sg : tensor<48x64xbf16>, tensor<48x64xbf16>) {top_k = 2 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.0 : f64} : tensor<1x64xbf16>, tensor<8x64xbf16>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16> -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: Operation does not verify: width 48 is not whole 32-value blocks
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x48xbf16>
  %y = form.quantize %x {words = 1 : i64} : (tensor<1x48xbf16>) -> tensor<1x48xi8>
  form.return
}

// -----

// CHECK: Operation does not verify: argmax's result is [1] of i32
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %y = form.argmax %x : (tensor<1x64xbf16>) -> tensor<1xi64>
  form.return
}

// -----

// CHECK: invalid.mlir:{{[0-9]+}}:21
// CHECK-NEXT: %y = form.softmax %x : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
// CHECK-NEXT: {{\^+}}
// CHECK-NEXT: Operation form.softmax is not registered
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %y = form.softmax %x : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
  form.return
}

// -----

// CHECK: invalid.mlir:{{[0-9]+}}:23
// CHECK-NEXT: %y = form.argmax %x (tensor<1x64xbf16>) -> tensor<1xi32>
// CHECK-NEXT: {{\^+}}
// CHECK-NEXT: Expected ':'
form.step batch 1 tokens 1 {
  %x = form.weight {name = "x", format = "bf16"} : tensor<1x64xbf16>
  %y = form.argmax %x (tensor<1x64xbf16>) -> tensor<1xi32>
  form.return
}

// -----

// CHECK: Operation does not verify: an all_reduce into the norm after it: the next op is a norm and its only reader
form.step batch 1 tokens 1 {
  %t = form.input {role = "tokens"} : tensor<1xi32>
  %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
  %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
  %y = form.all_reduce %x {ranks = 2 : i64, into = "norm"} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
  form.return %y : tensor<1x64xbf16>
}
