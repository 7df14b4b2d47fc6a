// RUN: lanec opt %s --split-input-file -p conv-l2norm | filecheck %s

// Fires: the per-head L2 norm of a conv's output goes into the conv's epilogue.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %s = form.state {name = "model.layers.1.conv", kind = "conv"} : tensor<2x64x3xbf16>
    %w = form.weight {name = "model.layers.1.q_conv1d.weight", format = "bf16"} : tensor<64x4xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<2x64x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %n = form.l2norm %c {heads = 2 : i64, eps = 1.000000e-06 : f64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    form.return %n : tensor<1x64xbf16>
  }
}

// CHECK: rule = "conv-l2norm", op = "conv %c (q_conv1d)", taken = true, reason = "L2 norm of 2 heads in the conv's epilogue", layer = 1 : i64
// CHECK: %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu", norm_heads = 2 : i64, norm_eps = 1.000000e-06 : f64}
// CHECK-NOT: form.l2norm
// CHECK: form.return %c

// -----

// Held back: the conv's output is read unnormed too.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %s = form.state {name = "conv", kind = "conv"} : tensor<2x64x3xbf16>
    %w = form.weight {name = "w", format = "bf16"} : tensor<64x4xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<2x64x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %n = form.l2norm %c {heads = 2 : i64, eps = 1.000000e-06 : f64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    form.return %n, %c : tensor<1x64xbf16>, tensor<1x64xbf16>
  }
}

// CHECK: rule = "conv-l2norm", op = "conv %c (w)", taken = false, reason = "the conv's output %c is read unnormed too"
// CHECK: %c = form.conv %x, %s, %w, %slots {offset = 0 : i64, activation = "silu"}
// CHECK-NEXT: %n = form.l2norm %c
