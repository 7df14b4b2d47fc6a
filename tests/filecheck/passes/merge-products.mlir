// RUN: lanec opt %s --split-input-file -p merge-products | filecheck %s

// Fires: the products of one activation become one product in parts, whatever their formats
// (hold-products-in-parts decides whether the lane launches it; under quantized numerics
// fuse-quant splits q8_0 parts, which read the activation int8, from bf16 parts, which read bf16).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.2.attn.q", format = "bf16"} : tensor<128x64xbf16>
    %wk = form.weight {name = "model.layers.2.attn.k", format = "q8_0"} : tensor<64x64xbf16>
    %wv = form.weight {name = "model.layers.2.attn.v", format = "bf16"} : tensor<32x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %x, %wq : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %k = form.product %x, %wk : (tensor<1x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
    %v = form.product %x, %wv : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    form.return %q, %k, %v : tensor<1x128xbf16>, tensor<1x64xbf16>, tensor<1x32xbf16>
  }
}

// CHECK: rule = "merge-products", op = "product %q (attn.q)", taken = true, reason = "3 products of one activation (%q, %k, %v) as one product in parts", layer = 2 : i64
// CHECK: %q, %k, %v = form.product %x, %wq, %wk, %wv : (tensor<1x64xbf16>, tensor<128x64xbf16>, tensor<64x64xbf16>, tensor<32x64xbf16>) -> (tensor<1x128xbf16>, tensor<1x64xbf16>, tensor<1x32xbf16>)
// CHECK-NEXT: form.return %q, %k, %v

// -----

// Held back: the products read two activations (one product each: nothing to merge); a gate and
// up pair of one activation is left to pair-gate-up.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %f = form.weight {name = "embed2", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "q", format = "bf16"} : tensor<128x64xbf16>
    %wk = form.weight {name = "k", format = "bf16"} : tensor<128x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %y = form.embed %t, %f : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %x, %wq : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %k = form.product %y, %wk : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %g = form.product %y, %wq : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %u = form.product %y, %wk : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %h = form.swiglu %g, %u : (tensor<1x128xbf16>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
    form.return %q, %k, %h : tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>
  }
}

// CHECK-NOT: lane.decisions
// CHECK: %q = form.product %x, %wq
// CHECK-NEXT: %k = form.product %y, %wk
// CHECK-NEXT: %g = form.product %y, %wq
// CHECK-NEXT: %u = form.product %y, %wk
