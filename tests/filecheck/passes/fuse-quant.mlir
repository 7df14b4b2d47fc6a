// RUN: lanec opt %s --split-input-file -p fuse-quant | filecheck %s

// Not a candidate under precise numerics: products by q8_0 rows read bf16.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.input_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %wq = form.weight {name = "model.layers.0.q_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wk = form.weight {name = "model.layers.0.k_proj.weight", format = "q8_0"} : tensor<32x64xbf16>
    %wb = form.weight {name = "model.layers.0.b_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.norm %x, %n {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %h, %wq : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    form.return %q : tensor<1x96xbf16>
  }
}

// CHECK-NOT: lane.decisions
// CHECK-NOT: form.quantize
// CHECK: %q = form.product %h, %wq

// -----

// Fires under quantized numerics (two words): the q8_0 products share one quantize; the bf16
// product reads bf16.
builtin.module attributes {lane.shim = {numerics = "quantized", words = 2 : i64}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.input_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %wq = form.weight {name = "model.layers.0.q_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wk = form.weight {name = "model.layers.0.k_proj.weight", format = "q8_0"} : tensor<32x64xbf16>
    %wb = form.weight {name = "model.layers.0.b_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.norm %x, %n {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %h, %wq : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %k = form.product %h, %wk : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    %b = form.product %h, %wb : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>
    form.return %q, %k, %b : tensor<1x96xbf16>, tensor<1x32xbf16>, tensor<1x32xbf16>
  }
}

// CHECK: rule = "fuse-quant", op = "product %q (q_proj)", taken = true, reason = "reads its activation %h quantized (2 int8 words a value): its rows are q8_0 checkpoint rows", layer = 0 : i64
// CHECK-SAME: rule = "fuse-quant", op = "product %k (k_proj)", taken = true
// CHECK: %h = form.norm %x, %n
// CHECK-NEXT: %[[Q:.*]] = form.quantize %h {words = 2 : i64} : (tensor<1x64xbf16>) -> tensor<1x64xi8>
// CHECK-NEXT: %q = form.product %[[Q]], %wq : (tensor<1x64xi8>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
// CHECK-NEXT: %k = form.product %[[Q]], %wk
// CHECK-NEXT: %b = form.product %h, %wb

// -----

// Fires under fuse_quant: the norm (every reader of its result quantized) quantizes in its epilogue.
builtin.module attributes {lane.shim = {numerics = "quantized", fuse_quant = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.input_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %wq = form.weight {name = "model.layers.0.q_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wk = form.weight {name = "model.layers.0.k_proj.weight", format = "q8_0"} : tensor<32x64xbf16>
    %wb = form.weight {name = "model.layers.0.b_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.norm %x, %n {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %h, %wq : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    form.return %q : tensor<1x96xbf16>
  }
}

// CHECK: rule = "fuse-quant", op = "product %q (q_proj)", taken = true
// CHECK-SAME: rule = "fuse-quant", op = "norm %h (input_layernorm)", taken = true, reason = "quantize of %h in the form.norm's epilogue"
// CHECK-NOT: form.quantize
// CHECK: %h = form.norm %x, %n {eps = 1.000000e-05 : f64, quantize = 1 : i64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xi8>
// CHECK-NEXT: %q = form.product %h, %wq : (tensor<1x64xi8>, tensor<96x64xbf16>) -> tensor<1x96xbf16>

// -----

// Held back under fuse_quant: the norm's result is read unquantized too: a standalone quantize.
builtin.module attributes {lane.shim = {numerics = "quantized", fuse_quant = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.input_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %wq = form.weight {name = "model.layers.0.q_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wk = form.weight {name = "model.layers.0.k_proj.weight", format = "q8_0"} : tensor<32x64xbf16>
    %wb = form.weight {name = "model.layers.0.b_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.norm %x, %n {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %h, %wq : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    form.return %q, %h : tensor<1x96xbf16>, tensor<1x64xbf16>
  }
}

// CHECK: rule = "fuse-quant", op = "norm %h (input_layernorm)", taken = false, reason = "stays a standalone quantize: %h is read unquantized too"
// CHECK: %[[Q:.*]] = form.quantize %h {words = 1 : i64}
// CHECK-NEXT: %q = form.product %[[Q]], %wq
// CHECK-NEXT: form.return %q, %h

// -----

// Held back under fuse_quant: the producer (an embed) has no quantize epilogue.
builtin.module attributes {lane.shim = {numerics = "quantized", fuse_quant = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.input_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %wq = form.weight {name = "model.layers.0.q_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wk = form.weight {name = "model.layers.0.k_proj.weight", format = "q8_0"} : tensor<32x64xbf16>
    %wb = form.weight {name = "model.layers.0.b_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %x, %wq : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    form.return %q : tensor<1x96xbf16>
  }
}

// CHECK: rule = "fuse-quant", op = "embed %x (embed)", taken = false, reason = "stays a standalone quantize: form.embed has no quantize epilogue"
// CHECK: %[[Q:.*]] = form.quantize %x {words = 1 : i64}
// CHECK-NEXT: %q = form.product %[[Q]], %wq
