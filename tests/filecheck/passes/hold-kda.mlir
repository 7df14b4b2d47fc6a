// RUN: lanec opt %s --split-input-file -p fold-kda,hold-kda | filecheck %s

// Kept: heads of 128, one token a request, conv width 4.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wg = form.weight {name = "model.layers.0.wg", format = "bf16"} : tensor<128x128xbf16>
    %cq = form.weight {name = "model.layers.0.cq", format = "bf16"} : tensor<128x4xbf16>
    %ck = form.weight {name = "model.layers.0.ck", format = "bf16"} : tensor<128x4xbf16>
    %cv = form.weight {name = "model.layers.0.cv", format = "bf16"} : tensor<128x4xbf16>
    %wfb = form.weight {name = "model.layers.0.wfb", format = "bf16"} : tensor<128x16xbf16>
    %nw = form.weight {name = "model.layers.0.nw", format = "bf16"} : tensor<128xbf16>
    %alog = form.weight {name = "model.layers.0.A_log", format = "bf16"} : tensor<1xf32>
    %dtb = form.weight {name = "model.layers.0.dt_bias", format = "bf16"} : tensor<128xf32>
    %cs = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<3x384x3xbf16>
    %st = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<3x1x128x128xf32>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %q, %k, %v, %fa, %b = form.product %x, %wq, %wk, %wv, %wfa, %wb : (tensor<1x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>) -> (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x16xbf16>, tensor<1x1xbf16>)
    %g = form.product %x, %wg : (tensor<1x128xbf16>, tensor<128x128xbf16>) -> tensor<1x128xbf16>
    %c1 = form.conv %q, %cs, %cq, %slots {offset = 0 : i64, activation = "silu"} : tensor<1x128xbf16>, tensor<3x384x3xbf16>, tensor<128x4xbf16>, tensor<1xi32> -> tensor<1x128xbf16>
    %c2 = form.conv %k, %cs, %ck, %slots {offset = 128 : i64, activation = "silu"} : tensor<1x128xbf16>, tensor<3x384x3xbf16>, tensor<128x4xbf16>, tensor<1xi32> -> tensor<1x128xbf16>
    %c3 = form.conv %v, %cs, %cv, %slots {offset = 256 : i64, activation = "silu"} : tensor<1x128xbf16>, tensor<3x384x3xbf16>, tensor<128x4xbf16>, tensor<1xi32> -> tensor<1x128xbf16>
    %n1 = form.l2norm %c1 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<1x128xbf16>) -> tensor<1x128xbf16>
    %n2 = form.l2norm %c2 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<1x128xbf16>) -> tensor<1x128xbf16>
    %f = form.product %fa, %wfb : (tensor<1x16xbf16>, tensor<128x16xbf16>) -> tensor<1x128xbf16>
    %d = form.kda_gate %f, %alog, %dtb {heads = 1 : i64, form = "softplus"} : (tensor<1x128xbf16>, tensor<1xf32>, tensor<128xf32>) -> tensor<1x128xf32>
    %beta = form.sigmoid %b : (tensor<1x1xbf16>) -> tensor<1x1xbf16>
    %o = form.delta_rule %n1, %n2, %c3, %d, %beta, %st, %slots {heads = 1 : i64, key_heads = 1 : i64, scale = 0.176 : f64} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xf32>, tensor<1x1xbf16>, tensor<3x1x128x128xf32>, tensor<1xi32>) -> tensor<1x128xbf16>
    %y = form.norm_gated %o, %g, %nw {heads = 1 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<128xbf16>) -> tensor<1x128xbf16>
    form.return %y : tensor<1x128xbf16>
  }
}

// CHECK: rule = "hold-kda", op = "kda %y (cq, ck, cv, +4 more)", taken = true, reason = "one KdaSplit launch: heads of 128, 1 token(s) a request, conv width 4", layer = 0 : i64
// CHECK: %y = form.kda

// -----

// Kept: 8 tokens a request (a speculative step, accepted counts), KdaSplit's most.
builtin.module {
  form.step batch 1 tokens 8 {
    %t = form.input {role = "tokens"} : tensor<8xi32>
    %slots = form.input {role = "slots"} : tensor<1x8xi32>
    %acc = form.input {role = "accepted"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wg = form.weight {name = "model.layers.0.wg", format = "bf16"} : tensor<128x128xbf16>
    %cq = form.weight {name = "model.layers.0.cq", format = "bf16"} : tensor<128x4xbf16>
    %ck = form.weight {name = "model.layers.0.ck", format = "bf16"} : tensor<128x4xbf16>
    %cv = form.weight {name = "model.layers.0.cv", format = "bf16"} : tensor<128x4xbf16>
    %wfb = form.weight {name = "model.layers.0.wfb", format = "bf16"} : tensor<128x16xbf16>
    %nw = form.weight {name = "model.layers.0.nw", format = "bf16"} : tensor<128xbf16>
    %alog = form.weight {name = "model.layers.0.A_log", format = "bf16"} : tensor<1xf32>
    %dtb = form.weight {name = "model.layers.0.dt_bias", format = "bf16"} : tensor<128xf32>
    %cs = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<3x384x10xbf16>
    %st = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<3x1x128x128xf32>
    %x = form.embed %t, %e : (tensor<8xi32>, tensor<32x128xbf16>) -> tensor<8x128xbf16>
    %q, %k, %v, %fa, %b = form.product %x, %wq, %wk, %wv, %wfa, %wb : (tensor<8x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>) -> (tensor<8x128xbf16>, tensor<8x128xbf16>, tensor<8x128xbf16>, tensor<8x16xbf16>, tensor<8x1xbf16>)
    %g = form.product %x, %wg : (tensor<8x128xbf16>, tensor<128x128xbf16>) -> tensor<8x128xbf16>
    %c1 = form.conv %q, %cs, %cq, %slots accepted %acc : tensor<1xi32> {offset = 0 : i64, activation = "silu"} : tensor<8x128xbf16>, tensor<3x384x10xbf16>, tensor<128x4xbf16>, tensor<1x8xi32> -> tensor<8x128xbf16>
    %c2 = form.conv %k, %cs, %ck, %slots accepted %acc : tensor<1xi32> {offset = 128 : i64, activation = "silu"} : tensor<8x128xbf16>, tensor<3x384x10xbf16>, tensor<128x4xbf16>, tensor<1x8xi32> -> tensor<8x128xbf16>
    %c3 = form.conv %v, %cs, %cv, %slots accepted %acc : tensor<1xi32> {offset = 256 : i64, activation = "silu"} : tensor<8x128xbf16>, tensor<3x384x10xbf16>, tensor<128x4xbf16>, tensor<1x8xi32> -> tensor<8x128xbf16>
    %n1 = form.l2norm %c1 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<8x128xbf16>) -> tensor<8x128xbf16>
    %n2 = form.l2norm %c2 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<8x128xbf16>) -> tensor<8x128xbf16>
    %f = form.product %fa, %wfb : (tensor<8x16xbf16>, tensor<128x16xbf16>) -> tensor<8x128xbf16>
    %d = form.kda_gate %f, %alog, %dtb {heads = 1 : i64, form = "softplus"} : (tensor<8x128xbf16>, tensor<1xf32>, tensor<128xf32>) -> tensor<8x128xf32>
    %beta = form.sigmoid %b : (tensor<8x1xbf16>) -> tensor<8x1xbf16>
    %o = form.delta_rule %n1, %n2, %c3, %d, %beta, %st, %slots accepted %acc {heads = 1 : i64, key_heads = 1 : i64, scale = 0.176 : f64} : (tensor<8x128xbf16>, tensor<8x128xbf16>, tensor<8x128xbf16>, tensor<8x128xf32>, tensor<8x1xbf16>, tensor<3x1x128x128xf32>, tensor<1x8xi32>, tensor<1xi32>) -> tensor<8x128xbf16>
    %y = form.norm_gated %o, %g, %nw {heads = 1 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<8x128xbf16>, tensor<8x128xbf16>, tensor<128xbf16>) -> tensor<8x128xbf16>
    form.return %y : tensor<8x128xbf16>
  }
}

// CHECK: rule = "hold-kda", op = "kda %y (cq, ck, cv, +4 more)", taken = true, reason = "one KdaSplit launch: heads of 128, 8 token(s) a request, conv width 4"
// CHECK: %y = form.kda {{.*}} accepted %acc

// -----

// Held back: heads of 32 values: split back into the chain it folded.
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

// CHECK: rule = "hold-kda", op = "kda %y (cq, ck, cv, +4 more)", taken = false, reason = "kda split back into its chain: KdaSplit head size 32: its 128 main threads hold a key and a value channel each, so a head is 128 values"
// CHECK-NOT: form.kda qkv
// CHECK: %y_conv_q = form.conv %q, %cs, %cq, %slots {offset = 0 : i64, activation = "silu"}
// CHECK-NEXT: %y_conv_k = form.conv %k, %cs, %ck, %slots {offset = 64 : i64, activation = "silu"}
// CHECK-NEXT: %y_conv_v = form.conv %v, %cs, %cv, %slots {offset = 128 : i64, activation = "silu"}
// CHECK-NEXT: %y_q = form.l2norm %y_conv_q {heads = 2 : i64, eps = 1.000000e-06 : f64}
// CHECK-NEXT: %y_k = form.l2norm %y_conv_k {heads = 2 : i64, eps = 1.000000e-06 : f64}
// CHECK-NEXT: %y_f_b = form.product %fa, %wfb
// CHECK-NEXT: %y_decay = form.kda_gate %y_f_b, %alog, %dtb {heads = 2 : i64, form = "softplus"}
// CHECK-NEXT: %y_beta = form.sigmoid %b
// CHECK-NEXT: %y_rule = form.delta_rule %y_q, %y_k, %y_conv_v, %y_decay, %y_beta, %st, %slots {heads = 2 : i64, key_heads = 2 : i64, scale = 1.760000e-01 : f64}
// CHECK-NEXT: %y = form.norm_gated %y_rule, %g, %nw {heads = 2 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"}
// CHECK-NEXT: form.return %y

// -----

// Held back: 9 tokens a request.
builtin.module {
  form.step batch 1 tokens 9 {
    %t = form.input {role = "tokens"} : tensor<9xi32>
    %slots = form.input {role = "slots"} : tensor<1x9xi32>
    %acc = form.input {role = "accepted"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wg = form.weight {name = "model.layers.0.wg", format = "bf16"} : tensor<128x128xbf16>
    %cq = form.weight {name = "model.layers.0.cq", format = "bf16"} : tensor<128x4xbf16>
    %ck = form.weight {name = "model.layers.0.ck", format = "bf16"} : tensor<128x4xbf16>
    %cv = form.weight {name = "model.layers.0.cv", format = "bf16"} : tensor<128x4xbf16>
    %wfb = form.weight {name = "model.layers.0.wfb", format = "bf16"} : tensor<128x16xbf16>
    %nw = form.weight {name = "model.layers.0.nw", format = "bf16"} : tensor<128xbf16>
    %alog = form.weight {name = "model.layers.0.A_log", format = "bf16"} : tensor<1xf32>
    %dtb = form.weight {name = "model.layers.0.dt_bias", format = "bf16"} : tensor<128xf32>
    %cs = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<3x384x11xbf16>
    %st = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<3x1x128x128xf32>
    %x = form.embed %t, %e : (tensor<9xi32>, tensor<32x128xbf16>) -> tensor<9x128xbf16>
    %q, %k, %v, %fa, %b = form.product %x, %wq, %wk, %wv, %wfa, %wb : (tensor<9x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>) -> (tensor<9x128xbf16>, tensor<9x128xbf16>, tensor<9x128xbf16>, tensor<9x16xbf16>, tensor<9x1xbf16>)
    %g = form.product %x, %wg : (tensor<9x128xbf16>, tensor<128x128xbf16>) -> tensor<9x128xbf16>
    %c1 = form.conv %q, %cs, %cq, %slots accepted %acc : tensor<1xi32> {offset = 0 : i64, activation = "silu"} : tensor<9x128xbf16>, tensor<3x384x11xbf16>, tensor<128x4xbf16>, tensor<1x9xi32> -> tensor<9x128xbf16>
    %c2 = form.conv %k, %cs, %ck, %slots accepted %acc : tensor<1xi32> {offset = 128 : i64, activation = "silu"} : tensor<9x128xbf16>, tensor<3x384x11xbf16>, tensor<128x4xbf16>, tensor<1x9xi32> -> tensor<9x128xbf16>
    %c3 = form.conv %v, %cs, %cv, %slots accepted %acc : tensor<1xi32> {offset = 256 : i64, activation = "silu"} : tensor<9x128xbf16>, tensor<3x384x11xbf16>, tensor<128x4xbf16>, tensor<1x9xi32> -> tensor<9x128xbf16>
    %n1 = form.l2norm %c1 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<9x128xbf16>) -> tensor<9x128xbf16>
    %n2 = form.l2norm %c2 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<9x128xbf16>) -> tensor<9x128xbf16>
    %f = form.product %fa, %wfb : (tensor<9x16xbf16>, tensor<128x16xbf16>) -> tensor<9x128xbf16>
    %d = form.kda_gate %f, %alog, %dtb {heads = 1 : i64, form = "softplus"} : (tensor<9x128xbf16>, tensor<1xf32>, tensor<128xf32>) -> tensor<9x128xf32>
    %beta = form.sigmoid %b : (tensor<9x1xbf16>) -> tensor<9x1xbf16>
    %o = form.delta_rule %n1, %n2, %c3, %d, %beta, %st, %slots accepted %acc {heads = 1 : i64, key_heads = 1 : i64, scale = 0.176 : f64} : (tensor<9x128xbf16>, tensor<9x128xbf16>, tensor<9x128xbf16>, tensor<9x128xf32>, tensor<9x1xbf16>, tensor<3x1x128x128xf32>, tensor<1x9xi32>, tensor<1xi32>) -> tensor<9x128xbf16>
    %y = form.norm_gated %o, %g, %nw {heads = 1 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<9x128xbf16>, tensor<9x128xbf16>, tensor<128xbf16>) -> tensor<9x128xbf16>
    form.return %y : tensor<9x128xbf16>
  }
}

// CHECK: rule = "hold-kda", op = "kda %y (cq, ck, cv, +4 more)", taken = false, reason = "kda split back into its chain: KdaSplit supports 1-8 tokens per request; got 9"
// CHECK-NOT: form.kda qkv
// CHECK: form.delta_rule {{.*}} accepted %acc

// -----

// Held back: conv width 3.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wg = form.weight {name = "model.layers.0.wg", format = "bf16"} : tensor<128x128xbf16>
    %cq = form.weight {name = "model.layers.0.cq", format = "bf16"} : tensor<128x3xbf16>
    %ck = form.weight {name = "model.layers.0.ck", format = "bf16"} : tensor<128x3xbf16>
    %cv = form.weight {name = "model.layers.0.cv", format = "bf16"} : tensor<128x3xbf16>
    %wfb = form.weight {name = "model.layers.0.wfb", format = "bf16"} : tensor<128x16xbf16>
    %nw = form.weight {name = "model.layers.0.nw", format = "bf16"} : tensor<128xbf16>
    %alog = form.weight {name = "model.layers.0.A_log", format = "bf16"} : tensor<1xf32>
    %dtb = form.weight {name = "model.layers.0.dt_bias", format = "bf16"} : tensor<128xf32>
    %cs = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<3x384x2xbf16>
    %st = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<3x1x128x128xf32>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %q, %k, %v, %fa, %b = form.product %x, %wq, %wk, %wv, %wfa, %wb : (tensor<1x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>) -> (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x16xbf16>, tensor<1x1xbf16>)
    %g = form.product %x, %wg : (tensor<1x128xbf16>, tensor<128x128xbf16>) -> tensor<1x128xbf16>
    %c1 = form.conv %q, %cs, %cq, %slots {offset = 0 : i64, activation = "silu"} : tensor<1x128xbf16>, tensor<3x384x2xbf16>, tensor<128x3xbf16>, tensor<1xi32> -> tensor<1x128xbf16>
    %c2 = form.conv %k, %cs, %ck, %slots {offset = 128 : i64, activation = "silu"} : tensor<1x128xbf16>, tensor<3x384x2xbf16>, tensor<128x3xbf16>, tensor<1xi32> -> tensor<1x128xbf16>
    %c3 = form.conv %v, %cs, %cv, %slots {offset = 256 : i64, activation = "silu"} : tensor<1x128xbf16>, tensor<3x384x2xbf16>, tensor<128x3xbf16>, tensor<1xi32> -> tensor<1x128xbf16>
    %n1 = form.l2norm %c1 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<1x128xbf16>) -> tensor<1x128xbf16>
    %n2 = form.l2norm %c2 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<1x128xbf16>) -> tensor<1x128xbf16>
    %f = form.product %fa, %wfb : (tensor<1x16xbf16>, tensor<128x16xbf16>) -> tensor<1x128xbf16>
    %d = form.kda_gate %f, %alog, %dtb {heads = 1 : i64, form = "softplus"} : (tensor<1x128xbf16>, tensor<1xf32>, tensor<128xf32>) -> tensor<1x128xf32>
    %beta = form.sigmoid %b : (tensor<1x1xbf16>) -> tensor<1x1xbf16>
    %o = form.delta_rule %n1, %n2, %c3, %d, %beta, %st, %slots {heads = 1 : i64, key_heads = 1 : i64, scale = 0.176 : f64} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xf32>, tensor<1x1xbf16>, tensor<3x1x128x128xf32>, tensor<1xi32>) -> tensor<1x128xbf16>
    %y = form.norm_gated %o, %g, %nw {heads = 1 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<128xbf16>) -> tensor<1x128xbf16>
    form.return %y : tensor<1x128xbf16>
  }
}

// CHECK: rule = "hold-kda", op = "kda %y (cq, ck, cv, +4 more)", taken = false, reason = "kda split back into its chain: KdaSplit conv width 3: the conv keeps 3 taps of state, so width must be 4"
// CHECK-NOT: form.kda qkv
// CHECK: form.norm_gated
