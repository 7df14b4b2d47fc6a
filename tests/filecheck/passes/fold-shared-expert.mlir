// RUN: lanec opt %s --split-input-file -p fold-shared-expert | filecheck %s

// Fires: add(mixture(x), down(swiglu(gate x, up x))).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<4x64xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<4x32x64xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<4x32x64xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<4x64x32xbf16>
    %sg = form.weight {name = "model.layers.1.moe.shared.gate_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %su = form.weight {name = "model.layers.1.moe.shared.up_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %sd = form.weight {name = "model.layers.1.moe.shared.down_proj.weight", format = "bf16"} : tensor<64x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %r = form.mixture %x, %router, %eg, %eu, %ed {top_k = 2 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64} : tensor<1x64xbf16>, tensor<4x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16> -> tensor<1x64xbf16>
    %g = form.product %x, %sg : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    %u = form.product %x, %su : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    %h = form.swiglu %g, %u : (tensor<1x32xbf16>, tensor<1x32xbf16>) -> tensor<1x32xbf16>
    %s = form.product %h, %sd : (tensor<1x32xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    %m = form.add %r, %s : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-shared-expert", op = "mixture %r (moe.gate, moe.experts.w1, moe.experts.w3, +1 more)", taken = true, reason = "shared expert folded into the mixture's block of kept experts", layer = 1 : i64
// CHECK-NOT: form.swiglu
// CHECK: %m = form.mixture %x, %router, %eg, %eu, %ed shared(%sg, %su, %sd : tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<64x32xbf16>) {top_k = 2 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64}
// CHECK-NEXT: form.return %m

// -----

// Fires: the shared expert's gate and up already one gated pair.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<4x64xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<4x32x64xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<4x32x64xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<4x64x32xbf16>
    %sg = form.weight {name = "model.layers.1.moe.shared.gate_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %su = form.weight {name = "model.layers.1.moe.shared.up_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %sd = form.weight {name = "model.layers.1.moe.shared.down_proj.weight", format = "bf16"} : tensor<64x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %r = form.mixture %x, %router, %eg, %eu, %ed {top_k = 2 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64} : tensor<1x64xbf16>, tensor<4x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16> -> tensor<1x64xbf16>
    %h = form.gated_product %x, %sg, %su : (tensor<1x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    %s = form.product %h, %sd : (tensor<1x32xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    %m = form.add %r, %s : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-shared-expert", {{.*}} taken = true
// CHECK-NOT: form.gated_product
// CHECK: %m = form.mixture %x, %router, %eg, %eu, %ed shared(%sg, %su, %sd

// -----

// Held back: the mixture scatters its rows (the shared expert's rows would not be).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<4x64xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<4x32x64xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<4x32x64xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<4x64x32xbf16>
    %sg = form.weight {name = "model.layers.1.moe.shared.gate_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %su = form.weight {name = "model.layers.1.moe.shared.up_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %sd = form.weight {name = "model.layers.1.moe.shared.down_proj.weight", format = "bf16"} : tensor<64x32xbf16>
    %rows = form.input {role = "positions"} : tensor<1xi32>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %r = form.mixture %x, %router, %eg, %eu, %ed rows %rows : tensor<1xi32> {top_k = 2 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64} : tensor<1x64xbf16>, tensor<4x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16> -> tensor<1x64xbf16>
    %g = form.product %x, %sg : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    %u = form.product %x, %su : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    %h = form.swiglu %g, %u : (tensor<1x32xbf16>, tensor<1x32xbf16>) -> tensor<1x32xbf16>
    %s = form.product %h, %sd : (tensor<1x32xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    %m = form.add %r, %s : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-shared-expert", op = "mixture %r (moe.gate, moe.experts.w1, moe.experts.w3, +1 more)", taken = false, reason = "shared expert not folded: the mixture scatters its rows and the shared expert's rows would not be scattered", layer = 1 : i64
// CHECK: %r = form.mixture %x, %router, %eg, %eu, %ed rows %rows
// CHECK: %m = form.add %r, %s
