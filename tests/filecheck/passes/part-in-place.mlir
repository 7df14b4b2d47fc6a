// RUN: lanec opt %s --split-input-file -p part-in-place | filecheck %s

// Fires: a per-head product over whole units of a part copy reads the part in place.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x192xbf16>
    %w = form.weight {name = "model.layers.6.q_absorb", format = "bf16"} : tensor<64x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x192xbf16>) -> tensor<1x192xbf16>
    %p = form.part %x {heads = 2 : i64, unit = 96 : i64, offset = 32 : i64, length = 32 : i64} : (tensor<1x192xbf16>) -> tensor<1x64xbf16>
    %y = form.product %p, %w {heads = 2 : i64, unit = 32 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x64xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "part-in-place", op = "product %y (q_absorb)", taken = true, reason = "reads each head's part [32, 64) of %x in place", layer = 6 : i64
// CHECK-NOT: form.part
// CHECK: %y = form.product %x, %w {heads = 2 : i64, unit = 96 : i64, offset = 32 : i64, length = 32 : i64} : (tensor<1x192xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>

// -----

// Held back: the product's heads do not read whole units of the part (4 heads of 16 over a part
// of 2 heads of 32).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x192xbf16>
    %w = form.weight {name = "w", format = "bf16"} : tensor<64x16xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x192xbf16>) -> tensor<1x192xbf16>
    %p = form.part %x {heads = 2 : i64, unit = 96 : i64, offset = 32 : i64, length = 32 : i64} : (tensor<1x192xbf16>) -> tensor<1x64xbf16>
    %y = form.product %p, %w {heads = 4 : i64, unit = 16 : i64, offset = 0 : i64, length = 16 : i64} : (tensor<1x64xbf16>, tensor<64x16xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "part-in-place", op = "product %y (w)", taken = false, reason = "the product's heads do not read whole units of the part %p"
// CHECK: %p = form.part %x
// CHECK-NEXT: %y = form.product %p, %w
