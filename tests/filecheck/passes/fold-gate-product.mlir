// RUN: lanec opt %s --split-input-file -p fold-kda,hold-kda,fold-gate-product | filecheck %s

// Fires under fold_gate (on by default) at one row: Kimi Linear's output gate g_b(g_a(x)), g_a a part of the merged
// product, g_b of rank 128: the kda reads g_a and KdaSplit's gate warps do g_b's product (no launch of its own).
builtin.module attributes {lane.shim = {fold_gate = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wga = form.weight {name = "model.layers.0.wga", format = "bf16"} : tensor<128x128xbf16>
    %wgb = form.weight {name = "model.layers.0.wgb", format = "bf16"} : tensor<128x128xbf16>
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
    %q, %k, %v, %fa, %b, %ga = form.product %x, %wq, %wk, %wv, %wfa, %wb, %wga : (tensor<1x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>, tensor<128x128xbf16>) -> (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x16xbf16>, tensor<1x1xbf16>, tensor<1x128xbf16>)
    %g = form.product %ga, %wgb : (tensor<1x128xbf16>, tensor<128x128xbf16>) -> tensor<1x128xbf16>
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

// CHECK: rule = "fold-gate-product", op = "kda %y (cq, ck, cv, +5 more)", taken = true, reason = "the output gate's product (128 -> 128) done in KdaSplit's gate warps: its input read, no launch of its own", layer = 0 : i64
// CHECK: %q, %k, %v, %fa, %b, %ga = form.product
// CHECK-NOT: form.product
// CHECK: %y = form.kda {{.*}} out_gate %ga through %wgb : tensor<128x128xbf16> norm %nw

// -----

// Held back at two rows (KDA_GATE_FOLD_ROWS is 1): each request's CTAs would read the head's rows, g_b's own
// launch reads them once; the product stays a launch.
builtin.module attributes {lane.shim = {fold_gate = true}} {
  form.step batch 2 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<2xi32>
    %slots = form.input {role = "slots"} : tensor<2xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wga = form.weight {name = "model.layers.0.wga", format = "bf16"} : tensor<128x128xbf16>
    %wgb = form.weight {name = "model.layers.0.wgb", format = "bf16"} : tensor<128x128xbf16>
    %cq = form.weight {name = "model.layers.0.cq", format = "bf16"} : tensor<128x4xbf16>
    %ck = form.weight {name = "model.layers.0.ck", format = "bf16"} : tensor<128x4xbf16>
    %cv = form.weight {name = "model.layers.0.cv", format = "bf16"} : tensor<128x4xbf16>
    %wfb = form.weight {name = "model.layers.0.wfb", format = "bf16"} : tensor<128x16xbf16>
    %nw = form.weight {name = "model.layers.0.nw", format = "bf16"} : tensor<128xbf16>
    %alog = form.weight {name = "model.layers.0.A_log", format = "bf16"} : tensor<1xf32>
    %dtb = form.weight {name = "model.layers.0.dt_bias", format = "bf16"} : tensor<128xf32>
    %cs = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<3x384x3xbf16>
    %st = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<3x1x128x128xf32>
    %x = form.embed %t, %e : (tensor<2xi32>, tensor<32x128xbf16>) -> tensor<2x128xbf16>
    %q, %k, %v, %fa, %b, %ga = form.product %x, %wq, %wk, %wv, %wfa, %wb, %wga : (tensor<2x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>, tensor<128x128xbf16>) -> (tensor<2x128xbf16>, tensor<2x128xbf16>, tensor<2x128xbf16>, tensor<2x16xbf16>, tensor<2x1xbf16>, tensor<2x128xbf16>)
    %g = form.product %ga, %wgb : (tensor<2x128xbf16>, tensor<128x128xbf16>) -> tensor<2x128xbf16>
    %c1 = form.conv %q, %cs, %cq, %slots {offset = 0 : i64, activation = "silu"} : tensor<2x128xbf16>, tensor<3x384x3xbf16>, tensor<128x4xbf16>, tensor<2xi32> -> tensor<2x128xbf16>
    %c2 = form.conv %k, %cs, %ck, %slots {offset = 128 : i64, activation = "silu"} : tensor<2x128xbf16>, tensor<3x384x3xbf16>, tensor<128x4xbf16>, tensor<2xi32> -> tensor<2x128xbf16>
    %c3 = form.conv %v, %cs, %cv, %slots {offset = 256 : i64, activation = "silu"} : tensor<2x128xbf16>, tensor<3x384x3xbf16>, tensor<128x4xbf16>, tensor<2xi32> -> tensor<2x128xbf16>
    %n1 = form.l2norm %c1 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<2x128xbf16>) -> tensor<2x128xbf16>
    %n2 = form.l2norm %c2 {heads = 1 : i64, eps = 1.000000e-06 : f64} : (tensor<2x128xbf16>) -> tensor<2x128xbf16>
    %f = form.product %fa, %wfb : (tensor<2x16xbf16>, tensor<128x16xbf16>) -> tensor<2x128xbf16>
    %d = form.kda_gate %f, %alog, %dtb {heads = 1 : i64, form = "softplus"} : (tensor<2x128xbf16>, tensor<1xf32>, tensor<128xf32>) -> tensor<2x128xf32>
    %beta = form.sigmoid %b : (tensor<2x1xbf16>) -> tensor<2x1xbf16>
    %o = form.delta_rule %n1, %n2, %c3, %d, %beta, %st, %slots {heads = 1 : i64, key_heads = 1 : i64, scale = 0.176 : f64} : (tensor<2x128xbf16>, tensor<2x128xbf16>, tensor<2x128xbf16>, tensor<2x128xf32>, tensor<2x1xbf16>, tensor<3x1x128x128xf32>, tensor<2xi32>) -> tensor<2x128xbf16>
    %y = form.norm_gated %o, %g, %nw {heads = 1 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<2x128xbf16>, tensor<2x128xbf16>, tensor<128xbf16>) -> tensor<2x128xbf16>
    form.return %y : tensor<2x128xbf16>
  }
}

// CHECK: rule = "fold-gate-product", op = "kda %y (cq, ck, cv, +4 more)", taken = false, reason = "its 2 rows are more than the 1 at which the fold was measured faster (KDA_GATE_FOLD_ROWS; at 64 requests it was slower: each request's CTAs read the head's rows, the product's launch reads them once)", layer = 0 : i64
// CHECK: %g = form.product %ga, %wgb
// CHECK: %y = form.kda {{.*}} out_gate %g norm %nw

// -----

// Held back: a gate of rank 64 (KdaSplit's gate warps multiply rows of 128): its product stays a launch.
builtin.module attributes {lane.shim = {fold_gate = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wga = form.weight {name = "model.layers.0.wga", format = "bf16"} : tensor<64x128xbf16>
    %wgb = form.weight {name = "model.layers.0.wgb", format = "bf16"} : tensor<128x64xbf16>
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
    %q, %k, %v, %fa, %b, %ga = form.product %x, %wq, %wk, %wv, %wfa, %wb, %wga : (tensor<1x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>, tensor<64x128xbf16>) -> (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x16xbf16>, tensor<1x1xbf16>, tensor<1x64xbf16>)
    %g = form.product %ga, %wgb : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
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

// CHECK: rule = "fold-gate-product", op = "kda %y (cq, ck, cv, +4 more)", taken = false, reason = "KdaSplit folds output gate products of rank 128 (rows of 128 bf16 values, the gate warp's MMA width); this one has rank 64", layer = 0 : i64
// CHECK: %g = form.product %ga, %wgb
// CHECK-NEXT: %y = form.kda {{.*}} out_gate %g norm %nw

// -----

// Not folded: the gate is read outside the kda too.
builtin.module attributes {lane.shim = {fold_gate = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wga = form.weight {name = "model.layers.0.wga", format = "bf16"} : tensor<128x128xbf16>
    %wgb = form.weight {name = "model.layers.0.wgb", format = "bf16"} : tensor<128x128xbf16>
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
    %q, %k, %v, %fa, %b, %ga = form.product %x, %wq, %wk, %wv, %wfa, %wb, %wga : (tensor<1x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>, tensor<128x128xbf16>) -> (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x16xbf16>, tensor<1x1xbf16>, tensor<1x128xbf16>)
    %g = form.product %ga, %wgb : (tensor<1x128xbf16>, tensor<128x128xbf16>) -> tensor<1x128xbf16>
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
    form.return %y, %g : tensor<1x128xbf16>, tensor<1x128xbf16>
  }
}

// CHECK: rule = "fold-gate-product", op = "kda %y (cq, ck, cv, +4 more)", taken = false, reason = "the output gate's product is read outside the kda", layer = 0 : i64
// CHECK: %g = form.product %ga, %wgb
// CHECK: %y = form.kda {{.*}} out_gate %g norm %nw

// -----

// Off (--no-fold-gate): no decision, the product stays a launch.
builtin.module attributes {lane.shim = {fold_gate = false}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %slots = form.input {role = "slots"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x128xbf16>
    %wq = form.weight {name = "model.layers.0.wq", format = "bf16"} : tensor<128x128xbf16>
    %wk = form.weight {name = "model.layers.0.wk", format = "bf16"} : tensor<128x128xbf16>
    %wv = form.weight {name = "model.layers.0.wv", format = "bf16"} : tensor<128x128xbf16>
    %wfa = form.weight {name = "model.layers.0.wfa", format = "bf16"} : tensor<16x128xbf16>
    %wb = form.weight {name = "model.layers.0.wb", format = "bf16"} : tensor<1x128xbf16>
    %wga = form.weight {name = "model.layers.0.wga", format = "bf16"} : tensor<128x128xbf16>
    %wgb = form.weight {name = "model.layers.0.wgb", format = "bf16"} : tensor<128x128xbf16>
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
    %q, %k, %v, %fa, %b, %ga = form.product %x, %wq, %wk, %wv, %wfa, %wb, %wga : (tensor<1x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>, tensor<128x128xbf16>) -> (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x16xbf16>, tensor<1x1xbf16>, tensor<1x128xbf16>)
    %g = form.product %ga, %wgb : (tensor<1x128xbf16>, tensor<128x128xbf16>) -> tensor<1x128xbf16>
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

// CHECK-NOT: fold-gate-product
// CHECK: %g = form.product %ga, %wgb
// CHECK-NEXT: %y = form.kda {{.*}} out_gate %g norm %nw

// -----

// A kda written with its gate product folded, of rank 64: hold-kda keeps the kda and holds the product back,
// a launch before it.
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
    %wga = form.weight {name = "model.layers.0.wga", format = "bf16"} : tensor<64x128xbf16>
    %wgb = form.weight {name = "model.layers.0.wgb", format = "bf16"} : tensor<128x64xbf16>
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
    %q, %k, %v, %fa, %b, %ga = form.product %x, %wq, %wk, %wv, %wfa, %wb, %wga : (tensor<1x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<128x128xbf16>, tensor<16x128xbf16>, tensor<1x128xbf16>, tensor<64x128xbf16>) -> (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x16xbf16>, tensor<1x1xbf16>, tensor<1x64xbf16>)
    %g = form.product %ga, %wgb : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %y = form.kda qkv(%q, %k, %v) conv(%cq, %ck, %cv, %cs) gate(%fa, %wfb, %alog, %dtb) beta %b out_gate %ga through %wgb : tensor<128x64xbf16> norm %nw state %st slots %slots {heads = 1 : i64, form = "softplus", scale = 1.760000e-01 : f64, l2_eps = 1.000000e-06 : f64, eps = 1.000000e-05 : f64} : (tensor<1x128xbf16>, tensor<1x128xbf16>, tensor<1x128xbf16>) conv(tensor<128x4xbf16>, tensor<128x4xbf16>, tensor<128x4xbf16>, tensor<3x384x3xbf16>) gate(tensor<1x16xbf16>, tensor<128x16xbf16>, tensor<1xf32>, tensor<128xf32>) beta tensor<1x1xbf16> out_gate tensor<1x64xbf16> norm tensor<128xbf16> state tensor<3x1x128x128xf32> slots tensor<1xi32> -> tensor<1x128xbf16>
    form.return %y : tensor<1x128xbf16>
  }
}

// CHECK: rule = "hold-kda", op = "kda %y (cq, ck, cv, +5 more)", taken = false, reason = "one KdaSplit launch: heads of 128, 1 token(s) a request, conv width 4; its output gate's product held back: KdaSplit folds output gate products of rank 128 (rows of 128 bf16 values, the gate warp's MMA width); this one has rank 64", layer = 0 : i64
// CHECK: %[[GATE:.*]] = form.product %ga, %wgb
// CHECK-NEXT: %y = form.kda {{.*}} out_gate %[[GATE]] norm %nw
