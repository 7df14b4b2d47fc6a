// RUN: lanec opt %s --split-input-file -p hold-per-head-part | filecheck %s

// Kept: the part [32, 64) of each head's 96 values is whole 32-value blocks.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x192xbf16>
    %w = form.weight {name = "model.layers.6.q_absorb", format = "bf16"} : tensor<64x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x192xbf16>) -> tensor<1x192xbf16>
    %y = form.product %x, %w {heads = 2 : i64, unit = 96 : i64, offset = 32 : i64, length = 32 : i64} : (tensor<1x192xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-per-head-part", op = "product %y (q_absorb)", taken = true, reason = "reads each head's part [32, 64) of its 96 values in place: whole 32-value blocks", layer = 6 : i64
// CHECK: %y = form.product %x, %w {heads = 2 : i64, unit = 96 : i64, offset = 32 : i64, length = 32 : i64}

// -----

// Held back: offset 16 is not whole blocks: a part copy, then a per-head product over it.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x192xbf16>
    %w = form.weight {name = "w", format = "bf16"} : tensor<64x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x192xbf16>) -> tensor<1x192xbf16>
    %y = form.product %x, %w {heads = 2 : i64, unit = 96 : i64, offset = 16 : i64, length = 32 : i64} : (tensor<1x192xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-per-head-part", op = "product %y (w)", taken = false, reason = "per-head part split into a part copy and a per-head product: the part's offset 16 is not a whole number of 32-value blocks"
// CHECK: %y_part = form.part %x {heads = 2 : i64, unit = 96 : i64, offset = 16 : i64, length = 32 : i64} : (tensor<1x192xbf16>) -> tensor<1x64xbf16>
// CHECK-NEXT: %y = form.product %y_part, %w {heads = 2 : i64, unit = 32 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x64xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>

// -----

// Held back: length 48 is not whole blocks.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x192xbf16>
    %w = form.weight {name = "w", format = "bf16"} : tensor<64x48xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x192xbf16>) -> tensor<1x192xbf16>
    %y = form.product %x, %w {heads = 2 : i64, unit = 96 : i64, offset = 0 : i64, length = 48 : i64} : (tensor<1x192xbf16>, tensor<64x48xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-per-head-part", op = "product %y (w)", taken = false, reason = "per-head part split into a part copy and a per-head product: the part's length 48 is not a whole number of 32-value blocks"
// CHECK: form.part %x {heads = 2 : i64, unit = 96 : i64, offset = 0 : i64, length = 48 : i64}
// CHECK-NEXT: %y = form.product {{.*}} {heads = 2 : i64, unit = 48 : i64, offset = 0 : i64, length = 48 : i64}

// -----

// The absorbed latent attention reads each head's nope part in place: kept with nope 32, run
// expanded with nope 48.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %eq2 = form.weight {name = "embed_q2", format = "bf16"} : tensor<32x160xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x160xbf16>
    %kvb = form.weight {name = "kv_b", format = "bf16"} : tensor<128x128xbf16>
    %kvb2 = form.weight {name = "kv_b2", format = "bf16"} : tensor<160x128xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %qr2 = form.embed %t, %eq2 : (tensor<1xi32>, tensor<32x160xbf16>) -> tensor<1x160xbf16>
    %lat = form.embed %t, %el : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x32xbf16>, tensor<4x64x160xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    %o2 = form.latent_attention %qr2, %lat, %kr, %cache, %kvb2, %pages, %pos {heads = 2 : i64, nope = 48 : i64, rope = 32 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x160xbf16>, tensor<1x128xbf16>, tensor<1x32xbf16>, tensor<4x64x160xbf16>, tensor<160x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o, %o2 : tensor<1x64xbf16>, tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-per-head-part", op = "latent_attention %o (kv_b)", taken = true, reason = "absorbed: each head's nope part (0, 32) of its 64 query values read in place"
// CHECK-SAME: rule = "hold-per-head-part", op = "latent_attention %o2 (kv_b2)", taken = false, reason = "absorbed latent attention run expanded: each head's nope part: the part's length 48 is not a whole number of 32-value blocks; the unit 80 is not a whole number of 32-value blocks (head 1's part starts at 80)"
// CHECK: %o = form.latent_attention {{.*}} path = "absorbed"
// CHECK: %o2 = form.latent_attention {{.*}} path = "expanded"

// -----

// The unit's both sides, offset and length whole blocks: kept with 2 heads of 64 values (head 1's
// part starts at 64 + 32 = 96); held back with 2 heads of 48 (head 1's part [48 + 0, 48 + 32)
// straddles the blocks [32, 64) and [64, 96)); kept with one head of 48 (no head 1).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %e2 = form.weight {name = "embed2", format = "bf16"} : tensor<32x96xbf16>
    %e3 = form.weight {name = "embed3", format = "bf16"} : tensor<32x48xbf16>
    %w = form.weight {name = "w", format = "bf16"} : tensor<64x32xbf16>
    %w3 = form.weight {name = "w3", format = "bf16"} : tensor<32x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %x2 = form.embed %t, %e2 : (tensor<1xi32>, tensor<32x96xbf16>) -> tensor<1x96xbf16>
    %x3 = form.embed %t, %e3 : (tensor<1xi32>, tensor<32x48xbf16>) -> tensor<1x48xbf16>
    %y = form.product %x, %w {heads = 2 : i64, unit = 64 : i64, offset = 32 : i64, length = 32 : i64} : (tensor<1x128xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    %y2 = form.product %x2, %w {heads = 2 : i64, unit = 48 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x96xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    %y3 = form.product %x3, %w3 {heads = 1 : i64, unit = 48 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x48xbf16>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    form.return %y, %y2, %y3 : tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x32xbf16>
  }
}

// CHECK: op = "product %y (w)", taken = true, reason = "reads each head's part [32, 64) of its 64 values in place: whole 32-value blocks"
// CHECK-SAME: op = "product %y2 (w)", taken = false, reason = "per-head part split into a part copy and a per-head product: the unit 48 is not a whole number of 32-value blocks (head 1's part starts at 48)"
// CHECK-SAME: op = "product %y3 (w3)", taken = true, reason = "reads each head's part [0, 32) of its 48 values in place: whole 32-value blocks"
// CHECK: %y = form.product %x, %w {heads = 2 : i64, unit = 64 : i64, offset = 32 : i64
// CHECK: %y2_part = form.part %x2 {heads = 2 : i64, unit = 48 : i64, offset = 0 : i64, length = 32 : i64}
// CHECK-NEXT: %y2 = form.product %y2_part, %w {heads = 2 : i64, unit = 32 : i64, offset = 0 : i64, length = 32 : i64}
// CHECK: %y3 = form.product %x3, %w3 {heads = 1 : i64, unit = 48 : i64

// -----

// The latent attention's unrotated part has the same unit: nope 32 with rope 16 makes units of
// 48, so head 1's nope part straddles two blocks: run expanded. Nope 32 with rope 32: kept.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x96xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x128xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x16xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x144xbf16>
    %kvb = form.weight {name = "kv_b", format = "bf16"} : tensor<128x128xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x96xbf16>) -> tensor<1x96xbf16>
    %lat = form.embed %t, %el : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x16xbf16>) -> tensor<1x16xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 16 : i64, lora = 128 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x96xbf16>, tensor<1x128xbf16>, tensor<1x16xbf16>, tensor<4x64x144xbf16>, tensor<128x128xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o : tensor<1x64xbf16>
  }
}

// CHECK: op = "latent_attention %o (kv_b)", taken = false, reason = "absorbed latent attention run expanded: each head's nope part: the unit 48 is not a whole number of 32-value blocks (head 1's part starts at 48)"
// CHECK: %o = form.latent_attention {{.*}} path = "expanded"
