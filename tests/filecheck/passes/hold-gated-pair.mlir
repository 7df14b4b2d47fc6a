// RUN: lanec opt %s --split-input-file -p hold-gated-pair | filecheck %s

// Kept as a gated GEMV: a decode step's rows (1).
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<1x64xbf16>, tensor<1000x64xbf16>, tensor<1000x64xbf16>) -> tensor<1x1000xbf16>
    form.return %h : tensor<1x1000xbf16>
  }
}

// CHECK: rule = "hold-gated-pair", op = "gated_product %h (mlp.gate_proj, mlp.up_proj)", taken = true, reason = "gated pair as one gated GEMV: 1 rows are at most the GEMV's 16", layer = 0 : i64
// CHECK: %h = form.gated_product

// -----

// Kept as a gated GEMV: a batch's rows (32), whatever the width.
builtin.module attributes {lane.shim = {numerics = "quantized", batch_products = true}} {
  form.step batch 32 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<32x64xbf16>, tensor<1000x64xbf16>, tensor<1000x64xbf16>) -> tensor<32x1000xbf16>
    form.return %h : tensor<32x1000xbf16>
  }
}

// CHECK: reason = "gated pair as one gated GEMV: the products are a batch's"
// CHECK: %h = form.gated_product

// -----

// Kept as a gated GEMV: precise numerics (32 rows).
builtin.module {
  form.step batch 2 tokens 16 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<32x64xbf16>, tensor<1000x64xbf16>, tensor<1000x64xbf16>) -> tensor<32x1000xbf16>
    form.return %h : tensor<32x1000xbf16>
  }
}

// CHECK: reason = "gated pair as one gated GEMV: precise numerics"
// CHECK: %h = form.gated_product

// -----

// Kept on the tensor cores: quantized, 32 rows, formats agree, 512 = 2 pair tiles.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 2 tokens 16 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "q8_0"} : tensor<512x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "q8_0"} : tensor<512x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<32x64xbf16>, tensor<512x64xbf16>, tensor<512x64xbf16>) -> tensor<32x512xbf16>
    form.return %h : tensor<32x512xbf16>
  }
}

// CHECK: reason = "gated pair on the tensor cores: 32 rows, 2 pair tiles"
// CHECK: %h = form.gated_product

// -----

// Held back on the tensor cores: hidden width 1000 is not whole pair tiles. Split into gate and
// up products and a swiglu, which takes the pair's quantize epilogue.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 2 tokens 16 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<32x64xbf16>, tensor<1000x64xbf16>, tensor<1000x64xbf16>) -> tensor<32x1000xbf16>
    form.return %h : tensor<32x1000xbf16>
  }
}

// CHECK: rule = "hold-gated-pair", op = "gated_product %h (mlp.gate_proj, mlp.up_proj)", taken = false, reason = "gated pair split into gate and up products and a swiglu: hidden width 1000 is not a whole number of pair tiles (256)", layer = 0 : i64
// CHECK: %h_gate = form.product %x, %wg : (tensor<32x64xbf16>, tensor<1000x64xbf16>) -> tensor<32x1000xbf16>
// CHECK-NEXT: %h_up = form.product %x, %wu
// CHECK-NEXT: %h = form.swiglu %h_gate, %h_up : (tensor<32x1000xbf16>, tensor<32x1000xbf16>) -> tensor<32x1000xbf16>

// -----

// Held back on the tensor cores: gate q8_0, up bf16 (and 288 is not whole pair tiles either).
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 2 tokens 16 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "q8_0"} : tensor<288x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<288x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %h = form.gated_product %x, %wg, %wu {quantize = 1 : i64} : (tensor<32x64xbf16>, tensor<288x64xbf16>, tensor<288x64xbf16>) -> tensor<32x288xi8>
    form.return %h : tensor<32x288xi8>
  }
}

// CHECK: reason = "gated pair split into gate and up products and a swiglu: gate (q8_0) and up (bf16) formats differ; hidden width 288 is not a whole number of pair tiles (256)"
// CHECK: %h = form.swiglu %h_gate, %h_up {quantize = 1 : i64} : (tensor<32x288xbf16>, tensor<32x288xbf16>) -> tensor<32x288xi8>
