// RUN: lanec opt %s --split-input-file -p lane-before,shared,held-back | filecheck %s

// The whole table on a dense layer at a decode step's one row, quantized (q8_0 rows) with
// fuse_quant: q, k, v as one GEMV in parts reading the norm's quantized result, the residual in
// the second norm, gate and up as one gated GEMV whose epilogue quantizes for down.
builtin.module attributes {lane.shim = {numerics = "quantized", fuse_quant = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n1 = form.weight {name = "model.layers.0.input_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %wq = form.weight {name = "model.layers.0.q_proj.weight", format = "q8_0"} : tensor<64x64xbf16>
    %wk = form.weight {name = "model.layers.0.k_proj.weight", format = "q8_0"} : tensor<32x64xbf16>
    %wv = form.weight {name = "model.layers.0.v_proj.weight", format = "q8_0"} : tensor<32x64xbf16>
    %n2 = form.weight {name = "model.layers.0.post_attention_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %wg = form.weight {name = "model.layers.0.gate_proj.weight", format = "q8_0"} : tensor<128x64xbf16>
    %wu = form.weight {name = "model.layers.0.up_proj.weight", format = "q8_0"} : tensor<128x64xbf16>
    %wd = form.weight {name = "model.layers.0.down_proj.weight", format = "q8_0"} : tensor<64x128xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.norm %x, %n1 {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %h, %wq : (tensor<1x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
    %k = form.product %h, %wk : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    %v = form.product %h, %wv : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    %r = form.add %x, %q : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %m = form.norm %r, %n2 {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %g = form.product %m, %wg : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %u = form.product %m, %wu : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %s = form.swiglu %g, %u : (tensor<1x128xbf16>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
    %d = form.product %s, %wd : (tensor<1x128xbf16>, tensor<64x128xbf16>) -> tensor<1x64xbf16>
    %y = form.add %r, %d : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
    form.return %y, %k, %v : tensor<1x64xbf16>, tensor<1x32xbf16>, tensor<1x32xbf16>
  }
}

// CHECK: rule = "gemv-in-parts", {{[^}]*}} taken = true
// CHECK-SAME: rule = "pair-gate-up", {{[^}]*}} taken = true
// CHECK-SAME: rule = "fold-residual", {{[^}]*}} taken = true
// CHECK-SAME: rule = "fuse-quant", {{[^}]*}} taken = true
// CHECK-SAME: rule = "hold-gated-pair", {{[^}]*}} taken = true, reason = "gated pair as one gated GEMV (q8_gated_gemv): 1 rows are at most the 32 a GEMV launch takes"
// CHECK-SAME: rule = "hold-products-in-parts", {{[^}]*}} taken = true, reason = "3 parts as one GEMV in parts (q8_gemv): 1 rows are at most the 32 a GEMV launch takes"
// CHECK-SAME: rule = "hold-quantized-activation", {{[^}]*}} taken = true
// CHECK: %h = form.norm %x, %n1 {eps = 1.000000e-05 : f64, quantize = 1 : i64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xi8>
// CHECK-NEXT: %q, %k, %v = form.product %h, %wq, %wk, %wv : (tensor<1x64xi8>,
// CHECK-NEXT: %m, %r = form.norm %x, %n2, %q {eps = 1.000000e-05 : f64, quantize = 1 : i64}
// CHECK-NEXT: %s = form.gated_product %m, %wg, %wu {quantize = 1 : i64} : (tensor<1x64xi8>, tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xi8>
// CHECK-NEXT: %d = form.product %s, %wd : (tensor<1x128xi8>, tensor<64x128xbf16>) -> tensor<1x64xbf16>
// CHECK-NEXT: %y = form.add %r, %d
