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

// -----

// A product in parts mixing q8_0 and bf16 rows (merged by gemv-in-parts or merge-products, or
// written so) is split by the rows' format: its bf16 part reads bf16, as it does unmerged; the
// q8_0 parts read int8. (Parts all q8_0 stay one product in parts: the next case.)
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.q_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wb = form.weight {name = "model.layers.0.b_proj.weight", format = "bf16"} : tensor<32x64xbf16>
    %wk = form.weight {name = "model.layers.0.k_proj.weight", format = "q8_0"} : tensor<32x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %b, %k = form.product %x, %wq, %wb, %wk : (tensor<1x64xbf16>, tensor<96x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>) -> (tensor<1x96xbf16>, tensor<1x32xbf16>, tensor<1x32xbf16>)
    form.return %q, %b, %k : tensor<1x96xbf16>, tensor<1x32xbf16>, tensor<1x32xbf16>
  }
}

// CHECK: rule = "fuse-quant", op = "product %q (q_proj, b_proj, k_proj)", taken = false, reason = "product in parts split by the rows' format: its bf16 parts read the activation bf16, as they do unmerged"
// CHECK-SAME: rule = "fuse-quant", op = "product %q (q_proj, k_proj)", taken = true
// CHECK: %[[Q:.*]] = form.quantize %x {words = 1 : i64}
// CHECK-NEXT: %q, %k = form.product %[[Q]], %wq, %wk : (tensor<1x64xi8>, tensor<96x64xbf16>, tensor<32x64xbf16>) -> (tensor<1x96xbf16>, tensor<1x32xbf16>)
// CHECK-NEXT: %b = form.product %x, %wb : (tensor<1x64xbf16>, tensor<32x64xbf16>) -> tensor<1x32xbf16>

// -----

// A gated pair of q8_0 gate and bf16 up rows is split likewise: up reads bf16, as unpaired.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.gate_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wu = form.weight {name = "model.layers.0.up_proj.weight", format = "bf16"} : tensor<96x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<1x64xbf16>, tensor<96x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    form.return %h : tensor<1x96xbf16>
  }
}

// CHECK: rule = "fuse-quant", op = "gated_product %h (gate_proj, up_proj)", taken = false, reason = "gated pair split into gate and up products and a swiglu by the rows' format: its bf16 rows read the activation bf16, as they do unpaired"
// CHECK-SAME: rule = "fuse-quant", op = "product %h_gate (gate_proj)", taken = true
// CHECK: %[[Q:.*]] = form.quantize %x {words = 1 : i64}
// CHECK-NEXT: %h_gate = form.product %[[Q]], %wg
// CHECK-NEXT: %h_up = form.product %x, %wu
// CHECK-NEXT: %h = form.swiglu %h_gate, %h_up

// -----

// A per-head product by q8_0 rows reading parts that are not whole blocks of its activation
// (2 heads of 48 values: head 1's part starts at 48) reads them through a copy, quantized in the
// copy's own blocks, as it does unfused. With units of 64 (whole blocks) it reads the activation
// quantized in place.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x96xbf16>
    %f = form.weight {name = "embed2", format = "bf16"} : tensor<32x128xbf16>
    %w = form.weight {name = "model.layers.0.absorb", format = "q8_0"} : tensor<64x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x96xbf16>) -> tensor<1x96xbf16>
    %x2 = form.embed %t, %f : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %y = form.product %x, %w {heads = 2 : i64, unit = 48 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x96xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    %y2 = form.product %x2, %w {heads = 2 : i64, unit = 64 : i64, offset = 32 : i64, length = 32 : i64} : (tensor<1x128xbf16>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
    form.return %y, %y2 : tensor<1x64xbf16>, tensor<1x64xbf16>
  }
}

// CHECK: rule = "fuse-quant", op = "product %y (absorb)", taken = false, reason = "reads its heads' parts through a copy, quantized in its own blocks: the unit 48 is not a whole number of 32-value blocks (head 1's part starts at 48)"
// CHECK-SAME: rule = "fuse-quant", op = "product %y (absorb)", taken = true, reason = "reads its activation %y_part quantized
// CHECK-SAME: rule = "fuse-quant", op = "product %y2 (absorb)", taken = true, reason = "reads its activation %x2 quantized
// CHECK: %[[Q2:.*]] = form.quantize %x2
// CHECK-NEXT: %y_part = form.part %x {heads = 2 : i64, unit = 48 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x96xbf16>) -> tensor<1x64xbf16>
// CHECK-NEXT: %[[Q:.*]] = form.quantize %y_part {words = 1 : i64}
// CHECK-NEXT: %y = form.product %[[Q]], %w {heads = 2 : i64, unit = 32 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x64xi8>, tensor<64x32xbf16>) -> tensor<1x64xbf16>
// CHECK-NEXT: %y2 = form.product %[[Q2]], %w {heads = 2 : i64, unit = 64 : i64, offset = 32 : i64

// -----

// One head of 48 values, its part [0, 32) whole blocks but the activation (48) not: it cannot be
// quantized whole, so the part is read through a copy (32 values), quantized.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x48xbf16>
    %w = form.weight {name = "model.layers.0.absorb", format = "q8_0"} : tensor<32x32xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x48xbf16>) -> tensor<1x48xbf16>
    %y = form.product %x, %w {heads = 1 : i64, unit = 48 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x48xbf16>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    form.return %y : tensor<1x32xbf16>
  }
}

// CHECK: reason = "reads its heads' parts through a copy, quantized in its own blocks: the activation's width 48 is not whole 32-value blocks"
// CHECK: %y_part = form.part %x {heads = 1 : i64, unit = 48 : i64, offset = 0 : i64, length = 32 : i64}
// CHECK-NEXT: form.quantize %y_part

// -----

// A product in parts whose rows are all q8_0 stays one, reading its activation int8.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.q_proj.weight", format = "q8_0"} : tensor<96x64xbf16>
    %wk = form.weight {name = "model.layers.0.k_proj.weight", format = "q8_0"} : tensor<32x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k = form.product %x, %wq, %wk : (tensor<1x64xbf16>, tensor<96x64xbf16>, tensor<32x64xbf16>) -> (tensor<1x96xbf16>, tensor<1x32xbf16>)
    form.return %q, %k : tensor<1x96xbf16>, tensor<1x32xbf16>
  }
}

// CHECK: lane.decisions = [{stage = "shared", rule = "fuse-quant", op = "product %q (q_proj, k_proj)", taken = true
// CHECK-NOT: split by the rows' format
// CHECK: %[[Q:.*]] = form.quantize %x {words = 1 : i64}
// CHECK-NEXT: %q, %k = form.product %[[Q]], %wq, %wk
