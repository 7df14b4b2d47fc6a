// RUN: lanec opt %s --split-input-file -p latent-whole | filecheck %s

// Fires: 64 query rows a request (a wide chunk): absorbing costs more than expanding the 256
// cached rows once (heads 2, nope 32, rope 32, lora 128, v 32).
builtin.module {
  form.step batch 1 tokens 64 {
    %t = form.input {role = "tokens"} : tensor<64xi32>
    %pos = form.input {role = "positions"} : tensor<64xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %cache = form.state {name = "model.layers.3.latent", kind = "latent"} : tensor<4x64x160xbf16>
    %kvb = form.weight {name = "model.layers.3.self_attn.kv_b_proj.weight", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<64xi32>, tensor<32x128xbf16>) -> tensor<64x128xbf16>
    %lat = form.embed %t, %el : (tensor<64xi32>, tensor<32x128xbf16>) -> tensor<64x128xbf16>
    %kr = form.embed %t, %er : (tensor<64xi32>, tensor<32x32xbf16>) -> tensor<64x32xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64} : (tensor<64x128xbf16>, tensor<64x128xbf16>, tensor<64x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<64xi32>) -> tensor<64x64xbf16>
    form.return %o : tensor<64x64xbf16>
  }
}

// CHECK: rule = "latent-whole", op = "latent_attention %o (self_attn.kv_b_proj)", taken = true, reason = "a wide chunk taken whole, run expanded: 64 query rows a request: absorbed 10485760 multiply-adds, expanded 7340032 over 256 cached rows", layer = 3 : i64
// CHECK: %o = form.latent_attention {{.*}} path = "expanded"

// -----

// Held back: 32 query rows a request are not a wide chunk (absorbing is cheaper): left for
// absorb-latent.
builtin.module {
  form.step batch 1 tokens 32 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %pos = form.input {role = "positions"} : tensor<32xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x160xbf16>
    %kvb = form.weight {name = "kv_b", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<32xi32>, tensor<32x128xbf16>) -> tensor<32x128xbf16>
    %lat = form.embed %t, %el : (tensor<32xi32>, tensor<32x128xbf16>) -> tensor<32x128xbf16>
    %kr = form.embed %t, %er : (tensor<32xi32>, tensor<32x32xbf16>) -> tensor<32x32xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64} : (tensor<32x128xbf16>, tensor<32x128xbf16>, tensor<32x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<32xi32>) -> tensor<32x64xbf16>
    form.return %o : tensor<32x64xbf16>
  }
}

// CHECK: rule = "latent-whole", op = "latent_attention %o (kv_b)", taken = false, reason = "not a wide chunk, left to absorb-latent: 32 query rows a request: absorbed 5242880 multiply-adds, expanded 5767168 over 256 cached rows"
// CHECK-NOT: path
// CHECK: form.return
