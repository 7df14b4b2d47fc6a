// RUN: lanec opt %s --split-input-file -p hold-conv-l2norm | filecheck %s

// Kept: 4 heads of 64 values (at most 1024, whole warps, dividing the 256 channels).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x256xbf16>
    %s = form.state {name = "model.layers.1.conv", kind = "conv"} : tensor<2x256x3xbf16>
    %w = form.weight {name = "model.layers.1.conv1d.weight", format = "bf16"} : tensor<256x4xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x256xbf16>) -> tensor<1x256xbf16>
    %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu", norm_heads = 4 : i64, norm_eps = 1.000000e-06 : f64} : tensor<1x256xbf16>, tensor<2x256x3xbf16>, tensor<256x4xbf16>, tensor<1xi32> -> tensor<1x256xbf16>
    %y = form.mul %c, %c : (tensor<1x256xbf16>, tensor<1x256xbf16>) -> tensor<1x256xbf16>
    form.return %y, %c : tensor<1x256xbf16>, tensor<1x256xbf16>
  }
}

// CHECK: rule = "hold-conv-l2norm", op = "conv %c (conv1d)", taken = true, reason = "L2 norm of heads of 64 in the conv's epilogue", layer = 1 : i64
// CHECK: %c = form.conv {{.*}} norm_heads = 4 : i64

// -----

// Held back: one head of 2048 values is above 1024: the conv, then an l2norm every reader reads.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x2048xbf16>
    %s = form.state {name = "model.layers.2.conv", kind = "conv"} : tensor<2x2048x3xbf16>
    %w = form.weight {name = "model.layers.2.conv1d.weight", format = "bf16"} : tensor<2048x4xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x2048xbf16>) -> tensor<1x2048xbf16>
    %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu", norm_heads = 1 : i64, norm_eps = 1.000000e-06 : f64} : tensor<1x2048xbf16>, tensor<2x2048x3xbf16>, tensor<2048x4xbf16>, tensor<1xi32> -> tensor<1x2048xbf16>
    %y = form.mul %c, %c : (tensor<1x2048xbf16>, tensor<1x2048xbf16>) -> tensor<1x2048xbf16>
    form.return %y, %c : tensor<1x2048xbf16>, tensor<1x2048xbf16>
  }
}

// CHECK: rule = "hold-conv-l2norm", op = "conv %c (conv1d)", taken = false, reason = "conv + L2 norm split into a conv and an l2norm: head size 2048 is above 1024", layer = 2 : i64
// CHECK: %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu"} :
// CHECK-NEXT: %[[N:.*]] = form.l2norm %c {heads = 1 : i64, eps = 1.000000e-06 : f64}
// CHECK-NEXT: %y = form.mul %[[N]], %[[N]]
// CHECK-NEXT: form.return %y, %[[N]]

// -----

// Held back: heads of 48 values are not whole warps. (The third condition, the head size dividing
// the conv's channels, is what form.conv's verifier already demands of norm_heads: no form breaks it.)
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x96xbf16>
    %s = form.state {name = "model.layers.3.conv", kind = "conv"} : tensor<2x96x3xbf16>
    %w = form.weight {name = "model.layers.3.conv1d.weight", format = "bf16"} : tensor<96x4xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x96xbf16>) -> tensor<1x96xbf16>
    %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu", norm_heads = 2 : i64, norm_eps = 1.000000e-06 : f64} : tensor<1x96xbf16>, tensor<2x96x3xbf16>, tensor<96x4xbf16>, tensor<1xi32> -> tensor<1x96xbf16>
    %y = form.mul %c, %c : (tensor<1x96xbf16>, tensor<1x96xbf16>) -> tensor<1x96xbf16>
    form.return %y, %c : tensor<1x96xbf16>, tensor<1x96xbf16>
  }
}

// CHECK: rule = "hold-conv-l2norm", op = "conv %c (conv1d)", taken = false, reason = "conv + L2 norm split into a conv and an l2norm: head size 48 is not a whole number of warps (32)", layer = 3 : i64
// CHECK: form.l2norm %c {heads = 2 : i64

// -----

// The 1024 bound's both sides, whole warps either way: one head of 1024 values is kept...
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x1024xbf16>
    %s = form.state {name = "model.layers.2.conv", kind = "conv"} : tensor<2x1024x3xbf16>
    %w = form.weight {name = "model.layers.2.conv1d.weight", format = "bf16"} : tensor<1024x4xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x1024xbf16>) -> tensor<1x1024xbf16>
    %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu", norm_heads = 1 : i64, norm_eps = 1.000000e-06 : f64} : tensor<1x1024xbf16>, tensor<2x1024x3xbf16>, tensor<1024x4xbf16>, tensor<1xi32> -> tensor<1x1024xbf16>
    form.return %c : tensor<1x1024xbf16>
  }
}

// CHECK: taken = true, reason = "L2 norm of heads of 1024 in the conv's epilogue"

// -----

// ... one of 1056 (33 warps) is held back.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x1056xbf16>
    %s = form.state {name = "model.layers.2.conv", kind = "conv"} : tensor<2x1056x3xbf16>
    %w = form.weight {name = "model.layers.2.conv1d.weight", format = "bf16"} : tensor<1056x4xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x1056xbf16>) -> tensor<1x1056xbf16>
    %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu", norm_heads = 1 : i64, norm_eps = 1.000000e-06 : f64} : tensor<1x1056xbf16>, tensor<2x1056x3xbf16>, tensor<1056x4xbf16>, tensor<1xi32> -> tensor<1x1056xbf16>
    form.return %c : tensor<1x1056xbf16>
  }
}

// CHECK: taken = false, reason = "conv + L2 norm split into a conv and an l2norm: head size 1056 is above 1024"

// -----

// The warp's both sides: heads of 32 values are kept (heads of 48, above, are not).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %s = form.state {name = "model.layers.2.conv", kind = "conv"} : tensor<2x64x3xbf16>
    %w = form.weight {name = "model.layers.2.conv1d.weight", format = "bf16"} : tensor<64x4xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu", norm_heads = 2 : i64, norm_eps = 1.000000e-06 : f64} : tensor<1x64xbf16>, tensor<2x64x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    form.return %c : tensor<1x64xbf16>
  }
}

// CHECK: taken = true, reason = "L2 norm of heads of 32 in the conv's epilogue"
