// RUN: lanec opt %s --split-input-file -p hold-values-in-place | filecheck %s

// The absorbed latent attention reads its values (the latent, at place 0 of the cache row) in
// place, pitch lora + rope. Kept at pitch 128 + 32 = 160; run expanded at pitch 128 + 15 = 143.
// (The values' place is the row's start, 0, in every form a latent attention can take, so the
// "place even" condition holds by construction; the rule still checks it.)
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %eq2 = form.weight {name = "embed_q2", format = "bf16"} : tensor<32x94xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %er2 = form.weight {name = "embed_r2", format = "bf16"} : tensor<32x15xbf16>
    %cache = form.state {name = "model.layers.9.latent", kind = "latent"} : tensor<4x64x160xbf16>
    %cache2 = form.state {name = "model.layers.10.latent", kind = "latent"} : tensor<4x64x143xbf16>
    %kvb = form.weight {name = "model.layers.9.kv_b", format = "bf16"} : tensor<128x128xbf16>
    %kvb2 = form.weight {name = "model.layers.10.kv_b", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %qr2 = form.embed %t, %eq2 : (tensor<1xi32>, tensor<32x94xbf16>) -> tensor<1x94xbf16>
    %lat = form.embed %t, %el : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %kr2 = form.embed %t, %er2 : (tensor<1xi32>, tensor<32x15xbf16>) -> tensor<1x15xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    %o2 = form.latent_attention %qr2, %lat, %kr2, %cache2, %kvb2, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 15 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x94xbf16>, tensor<1x128xbf16>, tensor<1x15xbf16>, tensor<4x64x143xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o, %o2 : tensor<1x64xbf16>, tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-values-in-place", op = "latent_attention %o (kv_b)", taken = true, reason = "values read in place at 0, pitch 160: both even", layer = 9 : i64
// CHECK-SAME: rule = "hold-values-in-place", op = "latent_attention %o2 (kv_b)", taken = false, reason = "absorbed latent attention run expanded: the cache row's pitch 128 + 15 = 143 is odd", layer = 10 : i64
// CHECK: %o = form.latent_attention {{.*}} path = "absorbed"
// CHECK: %o2 = form.latent_attention {{.*}} path = "expanded"
