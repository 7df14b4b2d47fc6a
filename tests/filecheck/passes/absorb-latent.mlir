// RUN: lanec opt %s --split-input-file -p absorb-latent | filecheck %s

// Fires: a latent attention not taken whole runs absorbed.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x160xbf16>
    %kvb = form.weight {name = "model.layers.7.kv_b_proj.weight", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %lat = form.embed %t, %el : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o : tensor<1x64xbf16>
  }
}

// CHECK: rule = "absorb-latent", op = "latent_attention %o (kv_b_proj)", taken = true, reason = "absorbed: each head's nope part read in place, values read in place from the cache row", layer = 7 : i64
// CHECK: %o = form.latent_attention {{.*}} path = "absorbed"

// -----

// Not a candidate: latent-whole already took it whole (expanded).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x160xbf16>
    %kvb = form.weight {name = "kv_b", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %lat = form.embed %t, %el : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "expanded"} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o : tensor<1x64xbf16>
  }
}

// CHECK-NOT: lane.decisions
// CHECK: path = "expanded"
