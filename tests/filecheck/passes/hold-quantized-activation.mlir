// RUN: lanec opt %s --split-input-file -p hold-quantized-activation | filecheck %s

// Kept: a norm, a product of four rows a warp (a GEMV: 1 row) with whole-block outputs, and a
// gated pair of whole-block hidden width quantize in their epilogues (two words). (The words and
// whole-block widths are also what form's verifier demands of any quantize epilogue.)
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.norm.weight", format = "bf16"} : tensor<64xbf16>
    %wa = form.weight {name = "model.layers.0.q_a_proj.weight", format = "bf16"} : tensor<64x64xbf16>
    %wb = form.weight {name = "model.layers.0.q_b_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wg = form.weight {name = "model.layers.0.gate.weight", format = "bf16"} : tensor<64x64xbf16>
    %wu = form.weight {name = "model.layers.0.up.weight", format = "bf16"} : tensor<64x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.norm %x, %n {eps = 1.000000e-05 : f64, quantize = 2 : i64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xi8>
    %a = form.product %h, %wa {quantize = 2 : i64} : (tensor<1x64xi8>, tensor<64x64xbf16>) -> tensor<1x64xi8>
    %p = form.gated_product %x, %wg, %wu {quantize = 2 : i64} : (tensor<1x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xi8>
    %b = form.product %a, %wb : (tensor<1x64xi8>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %c = form.product %p, %wb : (tensor<1x64xi8>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    form.return %b, %c : tensor<1x96xbf16>, tensor<1x96xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "norm %h (norm)", taken = true, reason = "quantizes its result in its epilogue (2 words)", layer = 0 : i64
// CHECK-SAME: rule = "hold-quantized-activation", op = "product %a (q_a_proj)", taken = true
// CHECK-SAME: rule = "hold-quantized-activation", op = "gated_product %p (gate, up)", taken = true
// CHECK-NOT: form.quantize
// CHECK: %a = form.product %h, %wa {quantize = 2 : i64}

// -----

// Held back: a product of 33 rows (above a gemv launch's 32) is kept for the tensor cores, not four
// rows a warp: it writes bf16
// and a standalone quantize follows. The norm and the gated pair keep their epilogues.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 33 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.norm.weight", format = "bf16"} : tensor<64xbf16>
    %wa = form.weight {name = "model.layers.0.q_a_proj.weight", format = "bf16"} : tensor<64x64xbf16>
    %wb = form.weight {name = "model.layers.0.q_b_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wg = form.weight {name = "model.layers.0.gate.weight", format = "bf16"} : tensor<64x64xbf16>
    %wu = form.weight {name = "model.layers.0.up.weight", format = "bf16"} : tensor<64x64xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x64xbf16>) -> tensor<33x64xbf16>
    %h = form.norm %x, %n {eps = 1.000000e-05 : f64, quantize = 2 : i64} : (tensor<33x64xbf16>, tensor<64xbf16>) -> tensor<33x64xi8>
    %a = form.product %h, %wa {quantize = 2 : i64} : (tensor<33x64xi8>, tensor<64x64xbf16>) -> tensor<33x64xi8>
    %p = form.gated_product %x, %wg, %wu {quantize = 2 : i64} : (tensor<33x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<33x64xi8>
    %b = form.product %a, %wb : (tensor<33x64xi8>, tensor<96x64xbf16>) -> tensor<33x96xbf16>
    %c = form.product %p, %wb : (tensor<33x64xi8>, tensor<96x64xbf16>) -> tensor<33x96xbf16>
    form.return %b, %c : tensor<33x96xbf16>, tensor<33x96xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "product %a (q_a_proj)", taken = false, reason = "quantize epilogue split into a standalone quantize: a product of 33 rows (above the 32 a gemv launch takes) is kept for the tensor cores, not four rows a warp", layer = 0 : i64
// CHECK: %h = form.norm %x, %n {eps = 1.000000e-05 : f64, quantize = 2 : i64}
// CHECK-NEXT: %a = form.product %h, %wa : (tensor<33x64xi8>, tensor<64x64xbf16>) -> tensor<33x64xbf16>
// CHECK-NEXT: %[[Q:.*]] = form.quantize %a {words = 2 : i64} : (tensor<33x64xbf16>) -> tensor<33x64xi8>
// CHECK: %p = form.gated_product %x, %wg, %wu {quantize = 2 : i64}
// CHECK: %b = form.product %[[Q]], %wb

// -----

// Kept at the row limit: a product of 32 rows is a gemv launch's (four rows a warp) and keeps its
// quantize epilogue.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 32 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wa = form.weight {name = "model.layers.0.q_a_proj.weight", format = "bf16"} : tensor<64x64xbf16>
    %wb = form.weight {name = "model.layers.0.q_b_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %a = form.product %x, %wa {quantize = 1 : i64} : (tensor<32x64xbf16>, tensor<64x64xbf16>) -> tensor<32x64xi8>
    %b = form.product %a, %wb : (tensor<32x64xi8>, tensor<96x64xbf16>) -> tensor<32x96xbf16>
    form.return %b : tensor<32x96xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "product %a (q_a_proj)", taken = true, reason = "quantizes its result in its epilogue (1 word)"
// CHECK: %a = form.product %x, %wa {quantize = 1 : i64}

// -----

// The gated norm (head_norm): kept where its heads are whole 32-value blocks (2 heads of 64, a warp
// a head quantizes the head's own blocks); held back with heads of 48 (its 96 values are whole
// blocks, its heads are not): it writes bf16 and a standalone quantize follows.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %f = form.weight {name = "embed2", format = "bf16"} : tensor<32x96xbf16>
    %n = form.weight {name = "model.layers.0.linear_attn.norm.weight", format = "bf16"} : tensor<64xbf16>
    %m = form.weight {name = "model.layers.1.linear_attn.norm.weight", format = "bf16"} : tensor<48xbf16>
    %wo = form.weight {name = "model.layers.0.linear_attn.out_proj.weight", format = "q8_0"} : tensor<64x128xbf16>
    %wp = form.weight {name = "model.layers.1.linear_attn.out_proj.weight", format = "q8_0"} : tensor<64x96xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %z = form.embed %t, %f : (tensor<1xi32>, tensor<32x96xbf16>) -> tensor<1x96xbf16>
    %g = form.norm_gated %x, %x, %n {heads = 2 : i64, eps = 1.0e-05 : f64, activation = "swish", quantize = 1 : i64} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<64xbf16>) -> tensor<1x128xi8>
    %k = form.norm_gated %z, %z, %m {heads = 2 : i64, eps = 1.0e-05 : f64, activation = "swish", quantize = 1 : i64} : (tensor<1x96xbf16>, tensor<1x96xbf16>, tensor<48xbf16>) -> tensor<1x96xi8>
    %a = form.product %g, %wo : (tensor<1x128xi8>, tensor<64x128xbf16>) -> tensor<1x64xbf16>
    %b = form.product %k, %wp : (tensor<1x96xi8>, tensor<64x96xbf16>) -> tensor<1x64xbf16>
    form.return %a, %b : tensor<1x64xbf16>, tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "norm_gated %g (linear_attn.norm)", taken = true, reason = "quantizes its result in its epilogue (1 word)"
// CHECK-SAME: rule = "hold-quantized-activation", op = "norm_gated %k (linear_attn.norm)", taken = false, reason = "quantize epilogue split into a standalone quantize: the gated norm's head size 48 is not whole 32-value blocks (a warp quantizes its head's blocks)"
// CHECK: %g = form.norm_gated %x, %x, %n {heads = 2 : i64, eps = 1.000000e-05 : f64, activation = "swish", quantize = 1 : i64}
// CHECK: %k = form.norm_gated %z, %z, %m {heads = 2 : i64, eps = 1.000000e-05 : f64, activation = "swish"} : (tensor<1x96xbf16>, tensor<1x96xbf16>, tensor<48xbf16>) -> tensor<1x96xbf16>
// CHECK-NEXT: %k_1 = form.quantize %k {words = 1 : i64}

// -----

// Kept: a GQA attention at one request, its 2048 positions in 8 chunks that merge in its own cluster
// (4 head blocks x 8 chunks: at most CLUSTER_COMBINE_CTAS CTAs). The merge writes whole 32-value
// blocks, so the attention quantizes its result for the q8_0 product after it.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x128xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<2048x64xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<512x64xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<512x64xbf16>
    %kc = form.state {name = "model.layers.0.k_cache", kind = "kv"} : tensor<128x16x4x128xbf16>
    %vc = form.state {name = "model.layers.0.v_cache", kind = "kv"} : tensor<128x16x4x128xbf16>
    %wo = form.weight {name = "model.layers.0.o_proj.weight", format = "q8_0"} : tensor<64x2048xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k, %v = form.product %x, %wq, %wk, %wv : (tensor<1x64xbf16>, tensor<2048x64xbf16>, tensor<512x64xbf16>, tensor<512x64xbf16>) -> (tensor<1x2048xbf16>, tensor<1x512xbf16>, tensor<1x512xbf16>)
    %o = form.attention %q, %k, %v, %kc, %vc, %pages, %pos {heads = 16 : i64, kv_heads = 4 : i64, quantize = 1 : i64, scale = 0.088 : f64} : (tensor<1x2048xbf16>, tensor<1x512xbf16>, tensor<1x512xbf16>, tensor<128x16x4x128xbf16>, tensor<128x16x4x128xbf16>, tensor<1x128xi32>, tensor<1xi32>) -> tensor<1x2048xi8>
    %y = form.product %o, %wo : (tensor<1x2048xi8>, tensor<64x2048xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "attention %o", taken = true, reason = "quantizes its result in its epilogue (1 word)"
// CHECK-NOT: form.quantize
// CHECK: %o = form.attention {{.*}} quantize = 1 : i64

// -----

// Held back: at 64 requests the attention is one chunk (its rows store from the MMA's fragments), and
// at one request over 32768 positions its 32 chunks merge in an attention_combine launch. Either way it
// writes bf16, and a standalone quantize follows.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 64 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<64xi32>
    %pos = form.input {role = "positions"} : tensor<64xi32>
    %pages = form.input {role = "pages"} : tensor<64x128xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<2048x64xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<512x64xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<512x64xbf16>
    %kc = form.state {name = "model.layers.0.k_cache", kind = "kv"} : tensor<8192x16x4x128xbf16>
    %vc = form.state {name = "model.layers.0.v_cache", kind = "kv"} : tensor<8192x16x4x128xbf16>
    %wo = form.weight {name = "model.layers.0.o_proj.weight", format = "q8_0"} : tensor<64x2048xbf16>
    %x = form.embed %t, %e : (tensor<64xi32>, tensor<32x64xbf16>) -> tensor<64x64xbf16>
    %q, %k, %v = form.product %x, %wq, %wk, %wv : (tensor<64x64xbf16>, tensor<2048x64xbf16>, tensor<512x64xbf16>, tensor<512x64xbf16>) -> (tensor<64x2048xbf16>, tensor<64x512xbf16>, tensor<64x512xbf16>)
    %o = form.attention %q, %k, %v, %kc, %vc, %pages, %pos {heads = 16 : i64, kv_heads = 4 : i64, quantize = 2 : i64, scale = 0.088 : f64} : (tensor<64x2048xbf16>, tensor<64x512xbf16>, tensor<64x512xbf16>, tensor<8192x16x4x128xbf16>, tensor<8192x16x4x128xbf16>, tensor<64x128xi32>, tensor<64xi32>) -> tensor<64x2048xi8>
    %y = form.product %o, %wo : (tensor<64x2048xi8>, tensor<64x2048xbf16>) -> tensor<64x64xbf16>
    form.return %y : tensor<64x64xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "attention %o", taken = false, reason = "quantize epilogue split into a standalone quantize: the attention is one chunk, stored from the MMA's fragments: only a merge in the attention's own cluster quantizes (at most 64 CTAs)"
// CHECK: %o = form.attention %q, %k, %v, %kc, %vc, %pages, %pos {heads = 16 : i64, kv_heads = 4 : i64, scale = 8.800000e-02 : f64} : ({{.*}}) -> tensor<64x2048xbf16>
// CHECK-NEXT: form.quantize %o {words = 2 : i64} : (tensor<64x2048xbf16>) -> tensor<64x2048xi8>

// -----

builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x2048xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<2048x64xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<512x64xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<512x64xbf16>
    %kc = form.state {name = "model.layers.0.k_cache", kind = "kv"} : tensor<2048x16x4x128xbf16>
    %vc = form.state {name = "model.layers.0.v_cache", kind = "kv"} : tensor<2048x16x4x128xbf16>
    %wo = form.weight {name = "model.layers.0.o_proj.weight", format = "q8_0"} : tensor<64x2048xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k, %v = form.product %x, %wq, %wk, %wv : (tensor<1x64xbf16>, tensor<2048x64xbf16>, tensor<512x64xbf16>, tensor<512x64xbf16>) -> (tensor<1x2048xbf16>, tensor<1x512xbf16>, tensor<1x512xbf16>)
    %o = form.attention %q, %k, %v, %kc, %vc, %pages, %pos {heads = 16 : i64, kv_heads = 4 : i64, quantize = 1 : i64, scale = 0.088 : f64} : (tensor<1x2048xbf16>, tensor<1x512xbf16>, tensor<1x512xbf16>, tensor<2048x16x4x128xbf16>, tensor<2048x16x4x128xbf16>, tensor<1x2048xi32>, tensor<1xi32>) -> tensor<1x2048xi8>
    %y = form.product %o, %wo : (tensor<1x2048xi8>, tensor<64x2048xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "attention %o", taken = false, reason = "quantize epilogue split into a standalone quantize: the attention merges its 64 chunks in an attention_combine launch: only a merge in the attention's own cluster quantizes (at most 64 CTAs)"
// CHECK: form.quantize %o {words = 1 : i64}
