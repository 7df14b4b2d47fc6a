// RUN: lanec opt %s --split-input-file -p fold-kda | filecheck %s

// Fires: the whole KDA chain (q, k, v the parts of one product, convs at 0, dim, 2 dim of one state).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<64x64xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<64x64xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<64x64xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x64xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<2x64xbf16>
    %wg = form.weight {name = "model.layers.0.wg", format = "bf16"} : tensor<64x64xbf16>
    %cq = form.weight {name = "model.layers.0.cq", format = "bf16"} : tensor<64x4xbf16>
    %ck = form.weight {name = "model.layers.0.ck", format = "bf16"} : tensor<64x4xbf16>
    %cv = form.weight {name = "model.layers.0.cv", format = "bf16"} : tensor<64x4xbf16>
    %wfb = form.weight {name = "model.layers.0.wfb", format = "bf16"} : tensor<64x16xbf16>
    %nw = form.weight {name = "model.layers.0.nw", format = "bf16"} : tensor<32xbf16>
    %alog = form.weight {name = "model.layers.0.A_log", format = "bf16"} : tensor<2xf32>
    %dtb = form.weight {name = "model.layers.0.dt_bias", format = "bf16"} : tensor<64xf32>
    %cs = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<3x192x3xbf16>
    %st = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<3x2x32x32xf32>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k, %v, %fa, %b = form.product %x, %wq, %wk, %wv, %wfa, %wb : (tensor<1x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<16x64xbf16>, tensor<2x64xbf16>) -> (tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<1x2xbf16>)
    %g = form.product %x, %wg : (tensor<1x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
    %c1 = form.conv %q, %cs, %cq, %slots {offset = 0 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<3x192x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %c2 = form.conv %k, %cs, %ck, %slots {offset = 64 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<3x192x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %c3 = form.conv %v, %cs, %cv, %slots {offset = 128 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<3x192x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %n1 = form.l2norm %c1 {heads = 2 : i64, eps = 1.000000e-06 : f64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %n2 = form.l2norm %c2 {heads = 2 : i64, eps = 1.000000e-06 : f64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %f = form.product %fa, %wfb : (tensor<1x16xbf16>, tensor<64x16xbf16>) -> tensor<1x64xbf16>
    %d = form.kda_gate %f, %alog, %dtb {heads = 2 : i64, form = "softplus"} : (tensor<1x64xbf16>, tensor<2xf32>, tensor<64xf32>) -> tensor<1x64xf32>
    %beta = form.sigmoid %b : (tensor<1x2xbf16>) -> tensor<1x2xbf16>
    %o = form.delta_rule %n1, %n2, %c3, %d, %beta, %st, %slots {heads = 2 : i64, key_heads = 2 : i64, scale = 0.176 : f64} : (tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x64xf32>, tensor<1x2xbf16>, tensor<3x2x32x32xf32>, tensor<1xi32>) -> tensor<1x64xbf16>
    %y = form.norm_gated %o, %g, %nw {heads = 2 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<32xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-kda", op = "kda %y (cq, ck, cv, +4 more)", taken = true, reason = "conv, L2 norm, gate, beta, delta rule and gated norm folded into one kda", layer = 0 : i64
// CHECK: %q, %k, %v, %fa, %b = form.product
// CHECK-NEXT: %g = form.product %x, %wg
// CHECK-NEXT: %y = form.kda qkv(%q, %k, %v) conv(%cq, %ck, %cv, %cs) gate(%fa, %wfb, %alog, %dtb) beta %b out_gate %g norm %nw state %st slots %slots {heads = 2 : i64, form = "softplus", scale = 1.760000e-01 : f64, l2_eps = 1.000000e-06 : f64, eps = 1.000000e-05 : f64}
// CHECK-NEXT: form.return %y

// -----

// Held back: q and k are parts of one product, v of another.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<64x64xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<64x64xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<64x64xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x64xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<2x64xbf16>
    %wg = form.weight {name = "model.layers.0.wg", format = "bf16"} : tensor<64x64xbf16>
    %cq = form.weight {name = "model.layers.0.cq", format = "bf16"} : tensor<64x4xbf16>
    %ck = form.weight {name = "model.layers.0.ck", format = "bf16"} : tensor<64x4xbf16>
    %cv = form.weight {name = "model.layers.0.cv", format = "bf16"} : tensor<64x4xbf16>
    %wfb = form.weight {name = "model.layers.0.wfb", format = "bf16"} : tensor<64x16xbf16>
    %nw = form.weight {name = "model.layers.0.nw", format = "bf16"} : tensor<32xbf16>
    %alog = form.weight {name = "model.layers.0.A_log", format = "bf16"} : tensor<2xf32>
    %dtb = form.weight {name = "model.layers.0.dt_bias", format = "bf16"} : tensor<64xf32>
    %cs = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<3x192x3xbf16>
    %st = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<3x2x32x32xf32>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k = form.product %x, %wq, %wk : (tensor<1x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>) -> (tensor<1x64xbf16>, tensor<1x64xbf16>)
    %v, %fa, %b = form.product %x, %wv, %wfa, %wb : (tensor<1x64xbf16>, tensor<64x64xbf16>, tensor<16x64xbf16>, tensor<2x64xbf16>) -> (tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<1x2xbf16>)
    %g = form.product %x, %wg : (tensor<1x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
    %c1 = form.conv %q, %cs, %cq, %slots {offset = 0 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<3x192x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %c2 = form.conv %k, %cs, %ck, %slots {offset = 64 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<3x192x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %c3 = form.conv %v, %cs, %cv, %slots {offset = 128 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<3x192x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %n1 = form.l2norm %c1 {heads = 2 : i64, eps = 1.000000e-06 : f64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %n2 = form.l2norm %c2 {heads = 2 : i64, eps = 1.000000e-06 : f64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %f = form.product %fa, %wfb : (tensor<1x16xbf16>, tensor<64x16xbf16>) -> tensor<1x64xbf16>
    %d = form.kda_gate %f, %alog, %dtb {heads = 2 : i64, form = "softplus"} : (tensor<1x64xbf16>, tensor<2xf32>, tensor<64xf32>) -> tensor<1x64xf32>
    %beta = form.sigmoid %b : (tensor<1x2xbf16>) -> tensor<1x2xbf16>
    %o = form.delta_rule %n1, %n2, %c3, %d, %beta, %st, %slots {heads = 2 : i64, key_heads = 2 : i64, scale = 0.176 : f64} : (tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x64xf32>, tensor<1x2xbf16>, tensor<3x2x32x32xf32>, tensor<1xi32>) -> tensor<1x64xbf16>
    %y = form.norm_gated %o, %g, %nw {heads = 2 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<32xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-kda", op = "delta_rule %o", taken = false, reason = "not a KDA chain: q, k and v are not the parts of one product", layer = 0 : i64
// CHECK-NOT: form.kda qkv
// CHECK: form.delta_rule

// -----

// Held back: the k and v convs swap their channels of the conv state.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<64x64xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<64x64xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<64x64xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x64xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<2x64xbf16>
    %wg = form.weight {name = "model.layers.0.wg", format = "bf16"} : tensor<64x64xbf16>
    %cq = form.weight {name = "model.layers.0.cq", format = "bf16"} : tensor<64x4xbf16>
    %ck = form.weight {name = "model.layers.0.ck", format = "bf16"} : tensor<64x4xbf16>
    %cv = form.weight {name = "model.layers.0.cv", format = "bf16"} : tensor<64x4xbf16>
    %wfb = form.weight {name = "model.layers.0.wfb", format = "bf16"} : tensor<64x16xbf16>
    %nw = form.weight {name = "model.layers.0.nw", format = "bf16"} : tensor<32xbf16>
    %alog = form.weight {name = "model.layers.0.A_log", format = "bf16"} : tensor<2xf32>
    %dtb = form.weight {name = "model.layers.0.dt_bias", format = "bf16"} : tensor<64xf32>
    %cs = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<3x192x3xbf16>
    %st = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<3x2x32x32xf32>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q, %k, %v, %fa, %b = form.product %x, %wq, %wk, %wv, %wfa, %wb : (tensor<1x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<16x64xbf16>, tensor<2x64xbf16>) -> (tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<1x2xbf16>)
    %g = form.product %x, %wg : (tensor<1x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
    %c1 = form.conv %q, %cs, %cq, %slots {offset = 0 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<3x192x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %c2 = form.conv %k, %cs, %ck, %slots {offset = 128 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<3x192x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %c3 = form.conv %v, %cs, %cv, %slots {offset = 64 : i64, activation = "silu"} : tensor<1x64xbf16>, tensor<3x192x3xbf16>, tensor<64x4xbf16>, tensor<1xi32> -> tensor<1x64xbf16>
    %n1 = form.l2norm %c1 {heads = 2 : i64, eps = 1.000000e-06 : f64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %n2 = form.l2norm %c2 {heads = 2 : i64, eps = 1.000000e-06 : f64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %f = form.product %fa, %wfb : (tensor<1x16xbf16>, tensor<64x16xbf16>) -> tensor<1x64xbf16>
    %d = form.kda_gate %f, %alog, %dtb {heads = 2 : i64, form = "softplus"} : (tensor<1x64xbf16>, tensor<2xf32>, tensor<64xf32>) -> tensor<1x64xf32>
    %beta = form.sigmoid %b : (tensor<1x2xbf16>) -> tensor<1x2xbf16>
    %o = form.delta_rule %n1, %n2, %c3, %d, %beta, %st, %slots {heads = 2 : i64, key_heads = 2 : i64, scale = 0.176 : f64} : (tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<1x64xf32>, tensor<1x2xbf16>, tensor<3x2x32x32xf32>, tensor<1xi32>) -> tensor<1x64xbf16>
    %y = form.norm_gated %o, %g, %nw {heads = 2 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x64xbf16>, tensor<1x64xbf16>, tensor<32xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-kda", op = "delta_rule %o", taken = false, reason = "not a KDA chain: q, k, v's convs are not SiLU convs at offsets 0, 64, 128", layer = 0 : i64
// CHECK-NOT: form.kda qkv
// CHECK: form.delta_rule
