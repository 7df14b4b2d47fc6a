// RUN: lanec opt %s --split-input-file -p fold-norm-into-latent | filecheck %s

// Fires (fold_norms, on by default): the norm's one reader is an absorbed latent attention, as its latent row.
builtin.module attributes {lane.shim = {fold_norms = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %w = form.weight {name = "model.layers.7.self_attn.kv_a_layernorm.weight", format = "bf16"} : tensor<128xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x160xbf16>
    %kvb = form.weight {name = "model.layers.7.self_attn.kv_b_proj.weight", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %a = form.embed %t, %el : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %lat = form.norm %a, %w {eps = 1.000000e-06 : f64} : (tensor<1x128xbf16>, tensor<128xbf16>) -> tensor<1x128xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-norm-into-latent", op = "norm %lat (self_attn.kv_a_layernorm)", taken = true, reason = "rides in the query's absorption gemv of its one reader, latent_attention %o (self_attn.kv_b_proj): 1 row(s) of 128, a CTA more a row norming it after the PDL wait (one launch fewer)", layer = 7 : i64
// CHECK: %lat = form.norm %a, %w {eps = 1.000000e-06 : f64, prologue = "latent"}

// -----

// Held back: the latent attention runs expanded (latent_expand reads the latent row).
builtin.module attributes {lane.shim = {fold_norms = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %w = form.weight {name = "model.layers.7.self_attn.kv_a_layernorm.weight", format = "bf16"} : tensor<128xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x160xbf16>
    %kvb = form.weight {name = "model.layers.7.self_attn.kv_b_proj.weight", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %a = form.embed %t, %el : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %lat = form.norm %a, %w {eps = 1.000000e-06 : f64} : (tensor<1x128xbf16>, tensor<128xbf16>) -> tensor<1x128xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "expanded"} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-norm-into-latent", op = "norm %lat (self_attn.kv_a_layernorm)", taken = false, reason = "the latent attention runs expanded: latent_expand reads the latent row, no absorption gemv to ride"
// CHECK: %lat = form.norm %a, %w {eps = 1.000000e-06 : f64} :

// -----

// Held back: a residual (the rider writes no sum), and 16 rows (the absorption is a gemm_tc launch).
builtin.module attributes {lane.shim = {fold_norms = true}} {
  form.step batch 16 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<16xi32>
    %pos = form.input {role = "positions"} : tensor<16xi32>
    %pages = form.input {role = "pages"} : tensor<16x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %w = form.weight {name = "model.layers.7.self_attn.kv_a_layernorm.weight", format = "bf16"} : tensor<128xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x160xbf16>
    %kvb = form.weight {name = "model.layers.7.self_attn.kv_b_proj.weight", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<16xi32>, tensor<32x128xbf16>) -> tensor<16x128xbf16>
    %a = form.embed %t, %el : (tensor<16xi32>, tensor<32x128xbf16>) -> tensor<16x128xbf16>
    %kr = form.embed %t, %er : (tensor<16xi32>, tensor<32x32xbf16>) -> tensor<16x32xbf16>
    %lat, %h = form.norm %a, %w, %qr {eps = 1.000000e-06 : f64} : (tensor<16x128xbf16>, tensor<128xbf16>, tensor<16x128xbf16>) -> (tensor<16x128xbf16>, tensor<16x128xbf16>)
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<16x128xbf16>, tensor<16x128xbf16>, tensor<16x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<16x4xi32>, tensor<16xi32>) -> tensor<16x64xbf16>
    form.return %o : tensor<16x64xbf16>
  }
}

// CHECK: rule = "fold-norm-into-latent", op = "norm %lat (self_attn.kv_a_layernorm)", taken = false, reason = "the norm adds a residual: the rider writes no sum; 16 rows: the query's absorption is a gemm_tc launch (GEMM_FROM_ROWS 16), no gemv to ride"
// CHECK: %lat, %h = form.norm %a, %w, %qr {eps = 1.000000e-06 : f64} :

// -----

// Off under fold_norms = false: the rule decides nothing.
builtin.module attributes {lane.shim = {fold_norms = false}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %w = form.weight {name = "model.layers.7.self_attn.kv_a_layernorm.weight", format = "bf16"} : tensor<128xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x160xbf16>
    %kvb = form.weight {name = "model.layers.7.self_attn.kv_b_proj.weight", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %a = form.embed %t, %el : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %lat = form.norm %a, %w {eps = 1.000000e-06 : f64} : (tensor<1x128xbf16>, tensor<128xbf16>) -> tensor<1x128xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o : tensor<1x64xbf16>
  }
}

// CHECK-NOT: lane.decisions
// CHECK: %lat = form.norm %a, %w {eps = 1.000000e-06 : f64} :
