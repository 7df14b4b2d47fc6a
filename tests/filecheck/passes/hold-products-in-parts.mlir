// RUN: lanec opt %s --split-input-file -p hold-products-in-parts | filecheck %s

// Kept as one GEMV in parts: 8 rows (any parts, formats, widths).
builtin.module {
  form.step batch 8 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<8xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w0 = form.weight {name = "model.layers.0.p0", format = "bf16"} : tensor<96x64xbf16>
    %w1 = form.weight {name = "model.layers.0.p1", format = "q8_0"} : tensor<96x64xbf16>
    %w2 = form.weight {name = "model.layers.0.p2", format = "bf16"} : tensor<32x64xbf16>
    %w3 = form.weight {name = "model.layers.0.p3", format = "bf16"} : tensor<64x64xbf16>
    %w4 = form.weight {name = "model.layers.0.p4", format = "bf16"} : tensor<128x64xbf16>
    %x = form.embed %t, %e : (tensor<8xi32>, tensor<32x64xbf16>) -> tensor<8x64xbf16>
    %p0, %p1, %p2, %p3, %p4 = form.product %x, %w0, %w1, %w2, %w3, %w4 : (tensor<8x64xbf16>, tensor<96x64xbf16>, tensor<96x64xbf16>, tensor<32x64xbf16>, tensor<64x64xbf16>, tensor<128x64xbf16>) -> (tensor<8x96xbf16>, tensor<8x96xbf16>, tensor<8x32xbf16>, tensor<8x64xbf16>, tensor<8x128xbf16>)
    form.return %p0, %p1, %p2, %p3, %p4 : tensor<8x96xbf16>, tensor<8x96xbf16>, tensor<8x32xbf16>, tensor<8x64xbf16>, tensor<8x128xbf16>
  }
}

// CHECK: rule = "hold-products-in-parts", op = "product %p0 (p0, p1, p2, +2 more)", taken = true, reason = "5 parts as one GEMV in parts (gemv): 8 rows are at most the 32 a GEMV launch takes", layer = 0 : i64
// CHECK: %p0, %p1, %p2, %p3, %p4 = form.product

// -----

// Kept for the tensor cores: 33 rows (above the 32 a gemv launch takes), 2 parts of 128 and 256
// outputs, one format: one gemm_tc launch in parts.
builtin.module {
  form.step batch 33 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w0 = form.weight {name = "model.layers.0.p0", format = "bf16"} : tensor<128x64xbf16>
    %w1 = form.weight {name = "model.layers.0.p1", format = "bf16"} : tensor<256x64xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x64xbf16>) -> tensor<33x64xbf16>
    %p0, %p1 = form.product %x, %w0, %w1 : (tensor<33x64xbf16>, tensor<128x64xbf16>, tensor<256x64xbf16>) -> (tensor<33x128xbf16>, tensor<33x256xbf16>)
    form.return %p0, %p1 : tensor<33x128xbf16>, tensor<33x256xbf16>
  }
}

// CHECK: reason = "2 parts kept for the tensor cores' GEMM in parts (33 rows): one gemm_tc launch (gemv launches of 32 rows where its facts refuse the shape)"
// CHECK: %p0, %p1 = form.product

// -----

// Kept: 5 parts (gemm_tc takes any count, side by side in one row).
builtin.module {
  form.step batch 33 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w0 = form.weight {name = "model.layers.0.p0", format = "bf16"} : tensor<128x64xbf16>
    %w1 = form.weight {name = "model.layers.0.p1", format = "bf16"} : tensor<128x64xbf16>
    %w2 = form.weight {name = "model.layers.0.p2", format = "bf16"} : tensor<128x64xbf16>
    %w3 = form.weight {name = "model.layers.0.p3", format = "bf16"} : tensor<128x64xbf16>
    %w4 = form.weight {name = "model.layers.0.p4", format = "bf16"} : tensor<128x64xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x64xbf16>) -> tensor<33x64xbf16>
    %p0, %p1, %p2, %p3, %p4 = form.product %x, %w0, %w1, %w2, %w3, %w4 : (tensor<33x64xbf16>, tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128x64xbf16>) -> (tensor<33x128xbf16>, tensor<33x128xbf16>, tensor<33x128xbf16>, tensor<33x128xbf16>, tensor<33x128xbf16>)
    form.return %p0, %p1, %p2, %p3, %p4 : tensor<33x128xbf16>, tensor<33x128xbf16>, tensor<33x128xbf16>, tensor<33x128xbf16>, tensor<33x128xbf16>
  }
}

// CHECK: rule = "hold-products-in-parts", op = "product %p0 (p0, p1, p2, +2 more)", taken = true, reason = "5 parts kept for the tensor cores' GEMM in parts (33 rows): one gemm_tc launch (gemv launches of 32 rows where its facts refuse the shape)"
// CHECK: %p0, %p1, %p2, %p3, %p4 = form.product %x, %w0, %w1, %w2, %w3, %w4

// -----

// Held back: the parts mix formats.
builtin.module {
  form.step batch 33 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w0 = form.weight {name = "model.layers.0.p0", format = "bf16"} : tensor<128x64xbf16>
    %w1 = form.weight {name = "model.layers.0.p1", format = "q8_0"} : tensor<128x64xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x64xbf16>) -> tensor<33x64xbf16>
    %p0, %p1 = form.product %x, %w0, %w1 : (tensor<33x64xbf16>, tensor<128x64xbf16>, tensor<128x64xbf16>) -> (tensor<33x128xbf16>, tensor<33x128xbf16>)
    form.return %p0, %p1 : tensor<33x128xbf16>, tensor<33x128xbf16>
  }
}

// CHECK: reason = "products in parts split into one product a part (a gemm_tc launch each): the parts mix formats (bf16, q8_0)"
// CHECK: %p0 = form.product %x, %w0
// CHECK-NEXT: %p1 = form.product %x, %w1

// -----

// Kept: parts of 96 and 20 outputs (each at a place of whole 16-byte vectors: 96 and 24), no
// whole 128-output tiles needed.
builtin.module {
  form.step batch 33 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w0 = form.weight {name = "model.layers.0.p0", format = "bf16"} : tensor<96x64xbf16>
    %w1 = form.weight {name = "model.layers.0.p1", format = "bf16"} : tensor<20x64xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x64xbf16>) -> tensor<33x64xbf16>
    %p0, %p1 = form.product %x, %w0, %w1 : (tensor<33x64xbf16>, tensor<96x64xbf16>, tensor<20x64xbf16>) -> (tensor<33x96xbf16>, tensor<33x20xbf16>)
    form.return %p0, %p1 : tensor<33x96xbf16>, tensor<33x20xbf16>
  }
}

// CHECK: reason = "2 parts kept for the tensor cores' GEMM in parts (33 rows): one gemm_tc launch (gemv launches of 32 rows where its facts refuse the shape)"
// CHECK: %p0, %p1 = form.product %x, %w0, %w1

// -----

// Held back: a row of 60 values is no whole 16-byte vectors (gemm_tc's fact).
builtin.module {
  form.step batch 33 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x60xbf16>
    %w0 = form.weight {name = "model.layers.0.p0", format = "bf16"} : tensor<128x60xbf16>
    %w1 = form.weight {name = "model.layers.0.p1", format = "bf16"} : tensor<128x60xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x60xbf16>) -> tensor<33x60xbf16>
    %p0, %p1 = form.product %x, %w0, %w1 : (tensor<33x60xbf16>, tensor<128x60xbf16>, tensor<128x60xbf16>) -> (tensor<33x128xbf16>, tensor<33x128xbf16>)
    form.return %p0, %p1 : tensor<33x128xbf16>, tensor<33x128xbf16>
  }
}

// CHECK: reason = "products in parts split into one product a part (a gemm_tc launch each): width 60 must be a positive multiple of 8: bf16 values move as 16-byte vectors"
// CHECK: %p0 = form.product %x, %w0
// CHECK-NEXT: %p1 = form.product %x, %w1

// -----

// Kept as a GEMV in parts above 32 rows where the products are a batch's.
builtin.module attributes {lane.shim = {batch_products = true}} {
  form.step batch 64 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<64xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w0 = form.weight {name = "model.layers.0.p0", format = "bf16"} : tensor<96x64xbf16>
    %w1 = form.weight {name = "model.layers.0.p1", format = "bf16"} : tensor<96x64xbf16>
    %x = form.embed %t, %e : (tensor<64xi32>, tensor<32x64xbf16>) -> tensor<64x64xbf16>
    %p0, %p1 = form.product %x, %w0, %w1 : (tensor<64x64xbf16>, tensor<96x64xbf16>, tensor<96x64xbf16>) -> (tensor<64x96xbf16>, tensor<64x96xbf16>)
    form.return %p0, %p1 : tensor<64x96xbf16>, tensor<64x96xbf16>
  }
}

// CHECK: reason = "2 parts as one GEMV in parts (gemv): the products are a batch's"
// CHECK: %p0, %p1 = form.product

// -----

// Held back (5 parts, f_a's rows q8_0, the others bf16): a kda's q, k and v (one format) stay one
// product in parts, the others split.
builtin.module attributes {lane.shim = {numerics = "quantized"}} {
  form.step batch 40 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<40xi32>
    %slots = form.input {role = "slots"} : tensor<40xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "q8_0"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wg = form.weight {name = "model.layers.0.wg", format = "bf16"} : tensor<128x128xbf16>
    %cq = form.weight {name = "model.layers.0.cq", format = "bf16"} : tensor<128x4xbf16>
    %ck = form.weight {name = "model.layers.0.ck", format = "bf16"} : tensor<128x4xbf16>
    %cv = form.weight {name = "model.layers.0.cv", format = "bf16"} : tensor<128x4xbf16>
    %wfb = form.weight {name = "model.layers.0.wfb", format = "bf16"} : tensor<128x16xbf16>
    %nw = form.weight {name = "model.layers.0.nw", format = "bf16"} : tensor<128xbf16>
    %alog = form.weight {name = "model.layers.0.A_log", format = "bf16"} : tensor<1xf32>
    %dtb = form.weight {name = "model.layers.0.dt_bias", format = "bf16"} : tensor<128xf32>
    %cs = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<41x384x3xbf16>
    %st = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<41x1x128x128xf32>
    %x = form.embed %t, %e : (tensor<40xi32>, tensor<32x128xbf16>) -> tensor<40x128xbf16>
    %q, %k, %v, %fa, %b = form.product %x, %wq, %wk, %wv, %wfa, %wb : (tensor<40x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>) -> (tensor<40x128xbf16>, tensor<40x128xbf16>, tensor<40x128xbf16>, tensor<40x16xbf16>, tensor<40x1xbf16>)
    %g = form.product %x, %wg : (tensor<40x128xbf16>, tensor<128x128xbf16>) -> tensor<40x128xbf16>
    %y = form.kda qkv(%q, %k, %v) conv(%cq, %ck, %cv, %cs) gate(%fa, %wfb, %alog, %dtb) beta %b out_gate %g norm %nw state %st slots %slots {heads = 1 : i64, form = "softplus", scale = 1.760000e-01 : f64, l2_eps = 1.000000e-06 : f64, eps = 1.000000e-05 : f64} : (tensor<40x128xbf16>, tensor<40x128xbf16>, tensor<40x128xbf16>) conv(tensor<128x4xbf16>, tensor<128x4xbf16>, tensor<128x4xbf16>, tensor<41x384x3xbf16>) gate(tensor<40x16xbf16>, tensor<128x16xbf16>, tensor<1xf32>, tensor<128xf32>) beta tensor<40x1xbf16> out_gate tensor<40x128xbf16> norm tensor<128xbf16> state tensor<41x1x128x128xf32> slots tensor<40xi32> -> tensor<40x128xbf16>
    form.return %y : tensor<40x128xbf16>
  }
}


// CHECK: reason = "products in parts split into one product a part (a gemm_tc launch each): the parts mix formats (bf16, q8_0) (a kda's q, k and v stay one product in parts)"
// CHECK: %q, %k, %v = form.product %x, %wq, %wk, %wv : (tensor<40x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>) -> (tensor<40x128xbf16>, tensor<40x128xbf16>, tensor<40x128xbf16>)
// CHECK-NEXT: %fa = form.product %x, %wfa
// CHECK-NEXT: %b = form.product %x, %wb
// CHECK: %y = form.kda qkv(%q, %k, %v)

// -----

// Kept: 4 parts of q8_0 rows (one format).
builtin.module {
  form.step batch 33 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w0 = form.weight {name = "model.layers.0.p0", format = "q8_0"} : tensor<128x64xbf16>
    %w1 = form.weight {name = "model.layers.0.p1", format = "q8_0"} : tensor<256x64xbf16>
    %w2 = form.weight {name = "model.layers.0.p2", format = "q8_0"} : tensor<128x64xbf16>
    %w3 = form.weight {name = "model.layers.0.p3", format = "q8_0"} : tensor<384x64xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x64xbf16>) -> tensor<33x64xbf16>
    %p0, %p1, %p2, %p3 = form.product %x, %w0, %w1, %w2, %w3 : (tensor<33x64xbf16>, tensor<128x64xbf16>, tensor<256x64xbf16>, tensor<128x64xbf16>, tensor<384x64xbf16>) -> (tensor<33x128xbf16>, tensor<33x256xbf16>, tensor<33x128xbf16>, tensor<33x384xbf16>)
    form.return %p0, %p1, %p2, %p3 : tensor<33x128xbf16>, tensor<33x256xbf16>, tensor<33x128xbf16>, tensor<33x384xbf16>
  }
}

// CHECK: reason = "4 parts kept for the tensor cores' GEMM in parts (33 rows): one gemm_tc launch (gemv launches of 32 rows where its facts refuse the shape)"
// CHECK: %p0, %p1, %p2, %p3 = form.product
