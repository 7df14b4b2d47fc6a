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

// CHECK: rule = "hold-gated-pair", op = "gated_product %h (mlp.gate_proj, mlp.up_proj)", taken = true, reason = "gated pair as one gated GEMV (gated_gemv): 1 rows are at most the 32 a GEMV launch takes", layer = 0 : i64
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

// CHECK: reason = "gated pair as one gated GEMV (gated_gemv): the products are a batch's"
// CHECK: %h = form.gated_product

// -----

// Precise numerics, 64 rows (above a gemv launch's), hidden 1024 = 16 pair tiles of 64: one
// gemm_tc launch of side-by-side tiles.
builtin.module {
  form.step batch 4 tokens 16 {
    %t = form.input {role = "tokens"} : tensor<64xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<1024x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<1024x64xbf16>
    %x = form.embed %t, %e : (tensor<64xi32>, tensor<32x64xbf16>) -> tensor<64x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<64x64xbf16>, tensor<1024x64xbf16>, tensor<1024x64xbf16>) -> tensor<64x1024xbf16>
    form.return %h : tensor<64x1024xbf16>
  }
}

// CHECK: taken = true, reason = "gated pair on the tensor cores (64 rows): one gemm_tc launch of 16 pair tiles, 64 gate rows beside their 64 up rows, SwiGLU in the epilogue"
// CHECK: %h = form.gated_product

// -----

// Kept for the tensor cores: quantized, 64 rows (above the 32 a gemv launch takes), formats
// agree, 512 = 8 pair tiles of 64 hidden values (gemm_tc over q8_0 rows is not built: lanec
// compile names the op without a kernel).
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 4 tokens 16 {
    %t = form.input {role = "tokens"} : tensor<64xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "q8_0"} : tensor<512x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "q8_0"} : tensor<512x64xbf16>
    %x = form.embed %t, %e : (tensor<64xi32>, tensor<32x64xbf16>) -> tensor<64x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<64x64xbf16>, tensor<512x64xbf16>, tensor<512x64xbf16>) -> tensor<64x512xbf16>
    form.return %h : tensor<64x512xbf16>
  }
}

// CHECK: reason = "gated pair on the tensor cores (64 rows): one gemm_tc launch of 8 pair tiles, 64 gate rows beside their 64 up rows, SwiGLU in the epilogue"
// CHECK: %h = form.gated_product

// -----

// Held back for the tensor cores: hidden width 1000 is not whole pair tiles. Split into gate and
// up products and a swiglu, which takes the pair's quantize epilogue.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 4 tokens 16 {
    %t = form.input {role = "tokens"} : tensor<64xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<1000x64xbf16>
    %x = form.embed %t, %e : (tensor<64xi32>, tensor<32x64xbf16>) -> tensor<64x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<64x64xbf16>, tensor<1000x64xbf16>, tensor<1000x64xbf16>) -> tensor<64x1000xbf16>
    form.return %h : tensor<64x1000xbf16>
  }
}

// CHECK: rule = "hold-gated-pair", op = "gated_product %h (mlp.gate_proj, mlp.up_proj)", taken = false, reason = "gated pair split into gate and up products and a swiglu (elementwise): hidden width 1000 is not whole pair tiles (64 gate beside 64 up rows, one wgmma tile)", layer = 0 : i64
// CHECK: %h_gate = form.product %x, %wg : (tensor<64x64xbf16>, tensor<1000x64xbf16>) -> tensor<64x1000xbf16>
// CHECK-NEXT: %h_up = form.product %x, %wu
// CHECK-NEXT: %h = form.swiglu %h_gate, %h_up : (tensor<64x1000xbf16>, tensor<64x1000xbf16>) -> tensor<64x1000xbf16>

// -----

// Held back for the tensor cores: gate q8_0, up bf16 (and 288 is not whole pair tiles either).
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 4 tokens 16 {
    %t = form.input {role = "tokens"} : tensor<64xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "q8_0"} : tensor<288x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<288x64xbf16>
    %x = form.embed %t, %e : (tensor<64xi32>, tensor<32x64xbf16>) -> tensor<64x64xbf16>
    %h = form.gated_product %x, %wg, %wu {quantize = 1 : i64} : (tensor<64x64xbf16>, tensor<288x64xbf16>, tensor<288x64xbf16>) -> tensor<64x288xi8>
    form.return %h : tensor<64x288xi8>
  }
}

// CHECK: reason = "gated pair split into gate and up products and a swiglu (elementwise): gate (q8_0) and up (bf16) formats differ; hidden width 288 is not whole pair tiles (64 gate beside 64 up rows, one wgmma tile)"
// CHECK: %h = form.swiglu %h_gate, %h_up {quantize = 1 : i64} : (tensor<64x288xbf16>, tensor<64x288xbf16>) -> tensor<64x288xi8>

// -----

// The pair tile's both sides: 384 hidden values are 6 pair tiles of 64 (kept); 440 are not whole
// tiles (held back).
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 33 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.1.mlp.gate_proj.weight", format = "bf16"} : tensor<384x64xbf16>
    %wu = form.weight {name = "model.layers.1.mlp.up_proj.weight", format = "bf16"} : tensor<384x64xbf16>
    %wg2 = form.weight {name = "model.layers.2.mlp.gate_proj.weight", format = "bf16"} : tensor<440x64xbf16>
    %wu2 = form.weight {name = "model.layers.2.mlp.up_proj.weight", format = "bf16"} : tensor<440x64xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x64xbf16>) -> tensor<33x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<33x64xbf16>, tensor<384x64xbf16>, tensor<384x64xbf16>) -> tensor<33x384xbf16>
    %h2 = form.gated_product %x, %wg2, %wu2 : (tensor<33x64xbf16>, tensor<440x64xbf16>, tensor<440x64xbf16>) -> tensor<33x440xbf16>
    form.return %h, %h2 : tensor<33x384xbf16>, tensor<33x440xbf16>
  }
}

// CHECK: op = "gated_product %h (mlp.gate_proj, mlp.up_proj)", taken = true, reason = "gated pair on the tensor cores (33 rows): one gemm_tc launch of 6 pair tiles, 64 gate rows beside their 64 up rows, SwiGLU in the epilogue", layer = 1 : i64
// CHECK-SAME: op = "gated_product %h2 (mlp.gate_proj, mlp.up_proj)", taken = false, reason = "gated pair split into gate and up products and a swiglu (elementwise): hidden width 440 is not whole pair tiles (64 gate beside 64 up rows, one wgmma tile)", layer = 2 : i64
// CHECK: %h = form.gated_product %x, %wg, %wu
// CHECK: %h2 = form.swiglu %h2_gate, %h2_up

// -----

// The row limit's both sides under quantized numerics: 32 rows are a gemv launch's (a gated
// GEMV, whatever the width); 33 go the tensor cores' way (above: kept or split by their facts).
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 32 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<448x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<448x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %h = form.gated_product %x, %wg, %wu : (tensor<32x64xbf16>, tensor<448x64xbf16>, tensor<448x64xbf16>) -> tensor<32x448xbf16>
    form.return %h : tensor<32x448xbf16>
  }
}

// CHECK: reason = "gated pair as one gated GEMV (gated_gemv): 32 rows are at most the 32 a GEMV launch takes"
// CHECK: %h = form.gated_product
