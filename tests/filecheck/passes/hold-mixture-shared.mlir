// RUN: lanec opt %s --split-input-file -p hold-mixture-shared | filecheck %s

// Kept: a block of 3 warps (top_k 2 + the shared expert), no scatter.
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
    %m = form.mixture %x, %router, %eg, %eu, %ed shared(%sg, %su, %sd : tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<64x32xbf16>) {top_k = 2 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64} : tensor<1x64xbf16>, tensor<4x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16> -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-mixture-shared", op = "mixture %m (moe.gate, moe.experts.w1, moe.experts.w3, +4 more)", taken = true, reason = "shared expert in a block of 3 warps, no scatter", layer = 1 : i64
// CHECK: %m = form.mixture {{.*}} shared(%sg, %su, %sd

// -----

// Held back: top_k 32 + 1 shared = 33 warps: the routed mixture, the shared expert, an add.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<40x64xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<40x32x64xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<40x32x64xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<40x64x32xbf16>
    %sg = form.weight {name = "model.layers.1.moe.shared.gate_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %su = form.weight {name = "model.layers.1.moe.shared.up_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %sd = form.weight {name = "model.layers.1.moe.shared.down_proj.weight", format = "bf16"} : tensor<64x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %m = form.mixture %x, %router, %eg, %eu, %ed shared(%sg, %su, %sd : tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<64x32xbf16>) {top_k = 32 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64} : tensor<1x64xbf16>, tensor<40x64xbf16>, tensor<40x32x64xbf16>, tensor<40x32x64xbf16>, tensor<40x64x32xbf16> -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK: rule = "hold-mixture-shared", op = "mixture %m (moe.gate, moe.experts.w1, moe.experts.w3, +4 more)", taken = false, reason = "shared expert split out of the mixture: a block of 33 kept experts (32 routed + 1 shared, a warp each) is above 32 warps", layer = 1 : i64
// CHECK: %m_routed = form.mixture %x, %router, %eg, %eu, %ed {top_k = 32 : i64
// CHECK-NEXT: %m_shared_gate = form.product %x, %sg
// CHECK-NEXT: %m_shared_up = form.product %x, %su
// CHECK-NEXT: %m_shared_hidden = form.swiglu %m_shared_gate, %m_shared_up
// CHECK-NEXT: %m_shared = form.product %m_shared_hidden, %sd
// CHECK-NEXT: %m = form.add %m_routed, %m_shared
// CHECK-NEXT: form.return %m

// -----

// Kept at the boundary: top_k 31 + 1 shared = 32 warps.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<40x64xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<40x32x64xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<40x32x64xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<40x64x32xbf16>
    %sg = form.weight {name = "model.layers.1.moe.shared.gate_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %su = form.weight {name = "model.layers.1.moe.shared.up_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %sd = form.weight {name = "model.layers.1.moe.shared.down_proj.weight", format = "bf16"} : tensor<64x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %m = form.mixture %x, %router, %eg, %eu, %ed shared(%sg, %su, %sd : tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<64x32xbf16>) {top_k = 31 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64} : tensor<1x64xbf16>, tensor<40x64xbf16>, tensor<40x32x64xbf16>, tensor<40x32x64xbf16>, tensor<40x64x32xbf16> -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK: taken = true, reason = "shared expert in a block of 32 warps, no scatter"
// CHECK: %m = form.mixture {{.*}} shared(%sg, %su, %sd

// -----

// Not a candidate: a routed-only mixture that writes its rows in place (no shared expert to
// fold, no scatter), whatever its top_k.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<40x64xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<40x32x64xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<40x32x64xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<40x64x32xbf16>
    %sg = form.weight {name = "model.layers.1.moe.shared.gate_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %su = form.weight {name = "model.layers.1.moe.shared.up_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %sd = form.weight {name = "model.layers.1.moe.shared.down_proj.weight", format = "bf16"} : tensor<64x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %m = form.mixture %x, %router, %eg, %eu, %ed {top_k = 32 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64} : tensor<1x64xbf16>, tensor<40x64xbf16>, tensor<40x32x64xbf16>, tensor<40x32x64xbf16>, tensor<40x64x32xbf16> -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK-NOT: lane.decisions
// CHECK: %m = form.mixture %x, %router, %eg, %eu, %ed {top_k = 32 : i64
