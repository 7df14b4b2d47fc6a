// RUN: lanec opt %s --split-input-file -p pair-gate-up | filecheck %s

// Fires: gate and up products of one activation feeding a swiglu become one gated pair.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.5.mlp.gate_proj.weight", format = "bf16"} : tensor<96x64xbf16>
    %wu = form.weight {name = "model.layers.5.mlp.up_proj.weight", format = "bf16"} : tensor<96x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %g = form.product %x, %wg : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %u = form.product %x, %wu : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %h = form.swiglu %g, %u : (tensor<1x96xbf16>, tensor<1x96xbf16>) -> tensor<1x96xbf16>
    form.return %h : tensor<1x96xbf16>
  }
}

// CHECK: rule = "pair-gate-up", op = "swiglu %h", taken = true, reason = "gate %g and up %u of one activation as one gated pair", layer = 5 : i64
// CHECK-NOT: form.product
// CHECK: %h = form.gated_product %x, %wg, %wu : (tensor<1x64xbf16>, tensor<96x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
// CHECK-NEXT: form.return %h

// -----

// Held back: the gate product is read elsewhere too.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "gate", format = "bf16"} : tensor<96x64xbf16>
    %wu = form.weight {name = "up", format = "bf16"} : tensor<96x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %g = form.product %x, %wg : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %u = form.product %x, %wu : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %h = form.swiglu %g, %u : (tensor<1x96xbf16>, tensor<1x96xbf16>) -> tensor<1x96xbf16>
    form.return %h, %g : tensor<1x96xbf16>, tensor<1x96xbf16>
  }
}

// CHECK: rule = "pair-gate-up", op = "swiglu %h", taken = false, reason = "gate %g and up %u not paired: %g is read elsewhere too"
// CHECK: %h = form.swiglu %g, %u

// -----

// Held back: gate and up are parts of a product in parts.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "gate", format = "bf16"} : tensor<96x64xbf16>
    %wu = form.weight {name = "up", format = "bf16"} : tensor<96x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %g, %u = form.product %x, %wg, %wu : (tensor<1x64xbf16>, tensor<96x64xbf16>, tensor<96x64xbf16>) -> (tensor<1x96xbf16>, tensor<1x96xbf16>)
    %h = form.swiglu %g, %u : (tensor<1x96xbf16>, tensor<1x96xbf16>) -> tensor<1x96xbf16>
    form.return %h : tensor<1x96xbf16>
  }
}

// CHECK: rule = "pair-gate-up", op = "swiglu %h", taken = false, reason = "gate %g and up %u not paired: %g is a part of a product in parts, a per-head part or a quantizing product"
// CHECK: %h = form.swiglu %g, %u

// -----

// Not a candidate: gate and up read different activations.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %f = form.weight {name = "embed2", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "gate", format = "bf16"} : tensor<96x64xbf16>
    %wu = form.weight {name = "up", format = "bf16"} : tensor<96x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %y = form.embed %t, %f : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %g = form.product %x, %wg : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %u = form.product %y, %wu : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %h = form.swiglu %g, %u : (tensor<1x96xbf16>, tensor<1x96xbf16>) -> tensor<1x96xbf16>
    form.return %h : tensor<1x96xbf16>
  }
}

// CHECK-NOT: lane.decisions
// CHECK: %h = form.swiglu %g, %u
