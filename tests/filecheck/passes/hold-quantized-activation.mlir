// RUN: lanec opt %s --split-input-file -p hold-quantized-activation | filecheck %s

// Kept: a norm, a product of four rows a warp (a GEMV: 1 row) with whole-block outputs, and a
// gated pair of whole-block hidden width quantize in their epilogues (two words). (The words and
// whole-block widths are also what form's verifier demands of any quantize epilogue.)
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.norm.weight", format = "bf16"} : tensor<64xbf16>
    %wa = form.weight {name = "model.layers.0.q_a_proj.weight", format = "bf16"} : tensor<64x64xbf16>
    %wb = form.weight {name = "model.layers.0.q_b_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wg = form.weight {name = "model.layers.0.gate.weight", format = "bf16"} : tensor<64x64xbf16>
    %wu = form.weight {name = "model.layers.0.up.weight", format = "bf16"} : tensor<64x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.norm %x, %n {eps = 1.000000e-05 : f64, quantize = 2 : i64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xi8>
    %a = form.product %h, %wa {quantize = 2 : i64} : (tensor<1x64xi8>, tensor<64x64xbf16>) -> tensor<1x64xi8>
    %p = form.gated_product %x, %wg, %wu {quantize = 2 : i64} : (tensor<1x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xi8>
    %b = form.product %a, %wb : (tensor<1x64xi8>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %c = form.product %p, %wb : (tensor<1x64xi8>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    form.return %b, %c : tensor<1x96xbf16>, tensor<1x96xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "norm %h (norm)", taken = true, reason = "quantizes its result in its epilogue (2 words)", layer = 0 : i64
// CHECK-SAME: rule = "hold-quantized-activation", op = "product %a (q_a_proj)", taken = true
// CHECK-SAME: rule = "hold-quantized-activation", op = "gated_product %p (gate, up)", taken = true
// CHECK-NOT: form.quantize
// CHECK: %a = form.product %h, %wa {quantize = 2 : i64}

// -----

// Held back: a product of 33 rows (above a gemv launch's 32) is kept for the tensor cores, not four
// rows a warp: it writes bf16
// and a standalone quantize follows. The norm and the gated pair keep their epilogues.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 33 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.norm.weight", format = "bf16"} : tensor<64xbf16>
    %wa = form.weight {name = "model.layers.0.q_a_proj.weight", format = "bf16"} : tensor<64x64xbf16>
    %wb = form.weight {name = "model.layers.0.q_b_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wg = form.weight {name = "model.layers.0.gate.weight", format = "bf16"} : tensor<64x64xbf16>
    %wu = form.weight {name = "model.layers.0.up.weight", format = "bf16"} : tensor<64x64xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x64xbf16>) -> tensor<33x64xbf16>
    %h = form.norm %x, %n {eps = 1.000000e-05 : f64, quantize = 2 : i64} : (tensor<33x64xbf16>, tensor<64xbf16>) -> tensor<33x64xi8>
    %a = form.product %h, %wa {quantize = 2 : i64} : (tensor<33x64xi8>, tensor<64x64xbf16>) -> tensor<33x64xi8>
    %p = form.gated_product %x, %wg, %wu {quantize = 2 : i64} : (tensor<33x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<33x64xi8>
    %b = form.product %a, %wb : (tensor<33x64xi8>, tensor<96x64xbf16>) -> tensor<33x96xbf16>
    %c = form.product %p, %wb : (tensor<33x64xi8>, tensor<96x64xbf16>) -> tensor<33x96xbf16>
    form.return %b, %c : tensor<33x96xbf16>, tensor<33x96xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "product %a (q_a_proj)", taken = false, reason = "quantize epilogue split into a standalone quantize: a product of 33 rows (above the 32 a gemv launch takes) is kept for the tensor cores, not four rows a warp", layer = 0 : i64
// CHECK: %h = form.norm %x, %n {eps = 1.000000e-05 : f64, quantize = 2 : i64}
// CHECK-NEXT: %a = form.product %h, %wa : (tensor<33x64xi8>, tensor<64x64xbf16>) -> tensor<33x64xbf16>
// CHECK-NEXT: %[[Q:.*]] = form.quantize %a {words = 2 : i64} : (tensor<33x64xbf16>) -> tensor<33x64xi8>
// CHECK: %p = form.gated_product %x, %wg, %wu {quantize = 2 : i64}
// CHECK: %b = form.product %[[Q]], %wb

// -----

// Kept at the row limit: a product of 32 rows is a gemv launch's (four rows a warp) and keeps its
// quantize epilogue.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 32 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wa = form.weight {name = "model.layers.0.q_a_proj.weight", format = "bf16"} : tensor<64x64xbf16>
    %wb = form.weight {name = "model.layers.0.q_b_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %a = form.product %x, %wa {quantize = 1 : i64} : (tensor<32x64xbf16>, tensor<64x64xbf16>) -> tensor<32x64xi8>
    %b = form.product %a, %wb : (tensor<32x64xi8>, tensor<96x64xbf16>) -> tensor<32x96xbf16>
    form.return %b : tensor<32x96xbf16>
  }
}

// CHECK: rule = "hold-quantized-activation", op = "product %a (q_a_proj)", taken = true, reason = "quantizes its result in its epilogue (1 word)"
// CHECK: %a = form.product %x, %wa {quantize = 1 : i64}
