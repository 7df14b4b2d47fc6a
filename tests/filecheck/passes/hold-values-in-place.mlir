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
// CHECK-SAME: rule = "hold-values-in-place", op = "latent_attention %o2 (kv_b)", taken = false, reason = "absorbed latent attention run expanded (cache rows of 128 + 15 values): the pitch 143 of the cache row is odd", layer = 10 : i64
// CHECK: %o = form.latent_attention {{.*}} path = "absorbed"
// CHECK: %o2 = form.latent_attention {{.*}} path = "expanded"

// -----

// A plain attention reads its values in place where they are a part of a product in parts: kept
// at place 32 + 16 = 48, pitch 64 (both even).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.3.wq", format = "bf16"} : tensor<32x64xbf16>
    %wk = form.weight {name = "model.layers.3.wk", format = "bf16"} : tensor<16x64xbf16>
    %wv = form.weight {name = "model.layers.3.wv", format = "bf16"} : tensor<16x64xbf16>
    %kc = form.state {name = "model.layers.3.k_cache", kind = "kv"} : tensor<4x16x1x16xbf16>
    %vc = form.state {name = "model.layers.3.v_cache", kind = "kv"} : tensor<4x16x1x16xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k, %v = form.product %x, %wq, %wk, %wv : (tensor<1x64xbf16>, tensor<32x64xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16>) -> (tensor<1x32xbf16>, tensor<1x16xbf16>, tensor<1x16xbf16>)
    %o = form.attention %q, %k, %v, %kc, %vc, %pages, %pos {heads = 2 : i64, kv_heads = 1 : i64, scale = 0.25 : f64} : (tensor<1x32xbf16>, tensor<1x16xbf16>, tensor<1x16xbf16>, tensor<4x16x1x16xbf16>, tensor<4x16x1x16xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x32xbf16>
    form.return %o : tensor<1x32xbf16>
  }
}

// CHECK: rule = "hold-values-in-place", op = "attention %o", taken = true, reason = "values %v read in place at 48, pitch 64: both even", layer = 3 : i64
// CHECK: %q, %k, %v = form.product %x, %wq, %wk, %wv

// -----

// Held back: values 17 wide make the row's pitch 32 + 16 + 17 = 65 odd: the values' part is split
// out of the product in parts into a product (a row) of its own.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.4.wq", format = "bf16"} : tensor<32x64xbf16>
    %wk = form.weight {name = "model.layers.4.wk", format = "bf16"} : tensor<16x64xbf16>
    %wv = form.weight {name = "model.layers.4.wv", format = "bf16"} : tensor<17x64xbf16>
    %kc = form.state {name = "model.layers.4.k_cache", kind = "kv"} : tensor<4x16x1x16xbf16>
    %vc = form.state {name = "model.layers.4.v_cache", kind = "kv"} : tensor<4x16x1x17xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k, %v = form.product %x, %wq, %wk, %wv : (tensor<1x64xbf16>, tensor<32x64xbf16>, tensor<16x64xbf16>, tensor<17x64xbf16>) -> (tensor<1x32xbf16>, tensor<1x16xbf16>, tensor<1x17xbf16>)
    %o = form.attention %q, %k, %v, %kc, %vc, %pages, %pos {heads = 2 : i64, kv_heads = 1 : i64, scale = 0.25 : f64} : (tensor<1x32xbf16>, tensor<1x16xbf16>, tensor<1x17xbf16>, tensor<4x16x1x16xbf16>, tensor<4x16x1x17xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x34xbf16>
    form.return %o : tensor<1x34xbf16>
  }
}

// CHECK: rule = "hold-values-in-place", op = "attention %o", taken = false, reason = "values %v split out of the product in parts into a row of their own: the pitch 65 of the row of %q, %k, %v is odd", layer = 4 : i64
// CHECK: %q, %k = form.product %x, %wq, %wk
// CHECK-NEXT: %v = form.product %x, %wv : (tensor<1x64xbf16>, tensor<17x64xbf16>) -> tensor<1x17xbf16>
// CHECK-NEXT: %o = form.attention %q, %k, %v

// -----

// Held back: a 1-wide part before the values puts them at the odd place 32 + 16 + 1 = 49.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.5.wq", format = "bf16"} : tensor<32x64xbf16>
    %wk = form.weight {name = "model.layers.5.wk", format = "bf16"} : tensor<16x64xbf16>
    %wb = form.weight {name = "model.layers.5.wb", format = "bf16"} : tensor<1x64xbf16>
    %wv = form.weight {name = "model.layers.5.wv", format = "bf16"} : tensor<16x64xbf16>
    %kc = form.state {name = "model.layers.5.k_cache", kind = "kv"} : tensor<4x16x1x16xbf16>
    %vc = form.state {name = "model.layers.5.v_cache", kind = "kv"} : tensor<4x16x1x16xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k, %b, %v = form.product %x, %wq, %wk, %wb, %wv : (tensor<1x64xbf16>, tensor<32x64xbf16>, tensor<16x64xbf16>, tensor<1x64xbf16>, tensor<16x64xbf16>) -> (tensor<1x32xbf16>, tensor<1x16xbf16>, tensor<1x1xbf16>, tensor<1x16xbf16>)
    %o = form.attention %q, %k, %v, %kc, %vc, %pages, %pos {heads = 2 : i64, kv_heads = 1 : i64, scale = 0.25 : f64} : (tensor<1x32xbf16>, tensor<1x16xbf16>, tensor<1x16xbf16>, tensor<4x16x1x16xbf16>, tensor<4x16x1x16xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x32xbf16>
    form.return %o, %b : tensor<1x32xbf16>, tensor<1x1xbf16>
  }
}

// CHECK: rule = "hold-values-in-place", op = "attention %o", taken = false, reason = "values %v split out of the product in parts into a row of their own: the values' place 49 in the row of %q, %k, %b, %v is odd; the pitch 65 of the row of %q, %k, %b, %v is odd", layer = 5 : i64
// CHECK: %q, %k, %b = form.product %x, %wq, %wk, %wb
// CHECK-NEXT: %v = form.product %x, %wv

// -----

// Not a candidate: values in a row of their own (a product of one weight) are not read in place.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.6.wq", format = "bf16"} : tensor<32x64xbf16>
    %wk = form.weight {name = "model.layers.6.wk", format = "bf16"} : tensor<16x64xbf16>
    %wv = form.weight {name = "model.layers.6.wv", format = "bf16"} : tensor<17x64xbf16>
    %kc = form.state {name = "model.layers.6.k_cache", kind = "kv"} : tensor<4x16x1x16xbf16>
    %vc = form.state {name = "model.layers.6.v_cache", kind = "kv"} : tensor<4x16x1x17xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k = form.product %x, %wq, %wk : (tensor<1x64xbf16>, tensor<32x64xbf16>, tensor<16x64xbf16>) -> (tensor<1x32xbf16>, tensor<1x16xbf16>)
    %v = form.product %x, %wv : (tensor<1x64xbf16>, tensor<17x64xbf16>) -> tensor<1x17xbf16>
    %o = form.attention %q, %k, %v, %kc, %vc, %pages, %pos {heads = 2 : i64, kv_heads = 1 : i64, scale = 0.25 : f64} : (tensor<1x32xbf16>, tensor<1x16xbf16>, tensor<1x17xbf16>, tensor<4x16x1x16xbf16>, tensor<4x16x1x17xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x34xbf16>
    form.return %o : tensor<1x34xbf16>
  }
}

// CHECK-NOT: lane.decisions
// CHECK: %o = form.attention %q, %k, %v
