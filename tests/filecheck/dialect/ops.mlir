// Every form op, printed and parsed back: the printed form is checked line by line, and printing
// what was printed (custom or generic) gives it again (print, parse, print is a fixed point).
// RUN: lanec opt %s --split-input-file | filecheck %s
// RUN: lanec opt %s --split-input-file | lanec opt --split-input-file | filecheck %s
// RUN: lanec opt %s --split-input-file --print-op-generic | lanec opt --split-input-file | filecheck %s

// A dense step (batch 2, tokens 1): leaves, products, norms, elementwise ops, attention, argmax.
form.step batch 2 tokens 1 {
  %tokens = form.input {role = "tokens"} : tensor<2xi32>
  %positions = form.input {role = "positions"} : tensor<2xi32>
  %slots = form.input {role = "slots"} : tensor<2xi32>
  %pages = form.input {role = "pages"} : tensor<2x4xi32>
  %embed = form.weight {name = "model.embed_tokens.weight", format = "bf16"} : tensor<256x64xbf16>
  %ln = form.weight {name = "ln", format = "bf16"} : tensor<64xbf16>
  %wq = form.weight {name = "q_proj", format = "q8_0"} : tensor<128x64xbf16>
  %wk = form.weight {name = "k_proj", format = "bf16"} : tensor<64x64xbf16>
  %wv = form.weight {name = "v_proj", format = "bf16"} : tensor<64x64xbf16>
  %wo = form.weight {name = "o_proj", format = "bf16"} : tensor<64x128xbf16>
  %wg = form.weight {name = "gate_proj", format = "q8_0"} : tensor<96x64xbf16>
  %wu = form.weight {name = "up_proj", format = "q8_0"} : tensor<96x64xbf16>
  %wd = form.weight {name = "down_proj", format = "bf16"} : tensor<64x96xbf16>
  %lm = form.weight {name = "lm_head", format = "bf16"} : tensor<256x64xbf16>
  %kc = form.state {name = "k_cache", kind = "kv"} : tensor<8x16x2x32xbf16>
  %vc = form.state {name = "v_cache", kind = "kv"} : tensor<8x16x2x32xbf16>
  %h = form.embed %tokens, %embed : (tensor<2xi32>, tensor<256x64xbf16>) -> tensor<2x64xbf16>
  %x = form.norm %h, %ln {eps = 1.0e-06 : f64} : (tensor<2x64xbf16>, tensor<64xbf16>) -> tensor<2x64xbf16>
  %q = form.product %x, %wq : (tensor<2x64xbf16>, tensor<128x64xbf16>) -> tensor<2x128xbf16>
  %k, %v = form.product %x, %wk, %wv : (tensor<2x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>) -> (tensor<2x64xbf16>, tensor<2x64xbf16>)
  %qr = form.rope %q, %positions {heads = 4 : i64, rotary = 32 : i64, theta = 1.0e+04 : f64} : (tensor<2x128xbf16>, tensor<2xi32>) -> tensor<2x128xbf16>
  %kr = form.rope %k, %positions {heads = 2 : i64, rotary = 16 : i64, theta = 1.0e+04 : f64} : (tensor<2x64xbf16>, tensor<2xi32>) -> tensor<2x64xbf16>
  %a = form.attention %qr, %kr, %v, %kc, %vc, %pages, %positions {heads = 4 : i64, kv_heads = 2 : i64, scale = 0.125 : f64} : (tensor<2x128xbf16>, tensor<2x64xbf16>, tensor<2x64xbf16>, tensor<8x16x2x32xbf16>, tensor<8x16x2x32xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> tensor<2x128xbf16>
  %o = form.product %a, %wo : (tensor<2x128xbf16>, tensor<64x128xbf16>) -> tensor<2x64xbf16>
  %y, %sum = form.norm %o, %ln, %h {eps = 1.0e-06 : f64, quantize = 1 : i64} : (tensor<2x64xbf16>, tensor<64xbf16>, tensor<2x64xbf16>) -> (tensor<2x64xi8>, tensor<2x64xbf16>)
  %pair = form.gated_product %y, %wg, %wu : (tensor<2x64xi8>, tensor<96x64xbf16>, tensor<96x64xbf16>) -> tensor<2x96xbf16>
  %g, %u = form.product %y, %wg, %wu : (tensor<2x64xi8>, tensor<96x64xbf16>, tensor<96x64xbf16>) -> (tensor<2x96xbf16>, tensor<2x96xbf16>)
  %act = form.swiglu %g, %u : (tensor<2x96xbf16>, tensor<2x96xbf16>) -> tensor<2x96xbf16>
  %gs = form.silu %g : (tensor<2x96xbf16>) -> tensor<2x96xbf16>
  %prod = form.mul %gs, %u : (tensor<2x96xbf16>, tensor<2x96xbf16>) -> tensor<2x96xbf16>
  %both = form.add %act, %prod {quantize = 2 : i64} : (tensor<2x96xbf16>, tensor<2x96xbf16>) -> tensor<2x96xi8>
  %down = form.product %both, %wd {quantize = 1 : i64} : (tensor<2x96xi8>, tensor<64x96xbf16>) -> tensor<2x64xi8>
  %gate = form.sigmoid %pair : (tensor<2x96xbf16>) -> tensor<2x96xbf16>
  %f = form.norm %sum, %ln {eps = 1.0e-05 : f64} : (tensor<2x64xbf16>, tensor<64xbf16>) -> tensor<2x64xbf16>
  %fq = form.quantize %f {words = 2 : i64} : (tensor<2x64xbf16>) -> tensor<2x64xi8>
  %logits = form.product %fq, %lm : (tensor<2x64xi8>, tensor<256x64xbf16>) -> tensor<2x256xf32>
  %next = form.argmax %logits : (tensor<2x256xf32>) -> tensor<2xi32>
  form.return %next, %down, %gate : tensor<2xi32>, tensor<2x64xi8>, tensor<2x96xbf16>
}

// CHECK-LABEL: form.step batch 2 tokens 1 {
// CHECK-NEXT:  %tokens = form.input {role = "tokens"} : tensor<2xi32>
// CHECK-NEXT:  %positions = form.input {role = "positions"} : tensor<2xi32>
// CHECK-NEXT:  %slots = form.input {role = "slots"} : tensor<2xi32>
// CHECK-NEXT:  %pages = form.input {role = "pages"} : tensor<2x4xi32>
// CHECK-NEXT:  %embed = form.weight {name = "model.embed_tokens.weight", format = "bf16"} : tensor<256x64xbf16>
// CHECK-NEXT:  %ln = form.weight {name = "ln", format = "bf16"} : tensor<64xbf16>
// CHECK-NEXT:  %wq = form.weight {name = "q_proj", format = "q8_0"} : tensor<128x64xbf16>
// CHECK-NEXT:  %wk = form.weight {name = "k_proj", format = "bf16"} : tensor<64x64xbf16>
// CHECK-NEXT:  %wv = form.weight {name = "v_proj", format = "bf16"} : tensor<64x64xbf16>
// CHECK-NEXT:  %wo = form.weight {name = "o_proj", format = "bf16"} : tensor<64x128xbf16>
// CHECK-NEXT:  %wg = form.weight {name = "gate_proj", format = "q8_0"} : tensor<96x64xbf16>
// CHECK-NEXT:  %wu = form.weight {name = "up_proj", format = "q8_0"} : tensor<96x64xbf16>
// CHECK-NEXT:  %wd = form.weight {name = "down_proj", format = "bf16"} : tensor<64x96xbf16>
// CHECK-NEXT:  %lm = form.weight {name = "lm_head", format = "bf16"} : tensor<256x64xbf16>
// CHECK-NEXT:  %kc = form.state {name = "k_cache", kind = "kv"} : tensor<8x16x2x32xbf16>
// CHECK-NEXT:  %vc = form.state {name = "v_cache", kind = "kv"} : tensor<8x16x2x32xbf16>
// CHECK-NEXT:  %h = form.embed %tokens, %embed : (tensor<2xi32>, tensor<256x64xbf16>) -> tensor<2x64xbf16>
// CHECK-NEXT:  %x = form.norm %h, %ln {eps = 1.000000e-06 : f64} : (tensor<2x64xbf16>, tensor<64xbf16>) -> tensor<2x64xbf16>
// CHECK-NEXT:  %q = form.product %x, %wq : (tensor<2x64xbf16>, tensor<128x64xbf16>) -> tensor<2x128xbf16>
// CHECK-NEXT:  %k, %v = form.product %x, %wk, %wv : (tensor<2x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>) -> (tensor<2x64xbf16>, tensor<2x64xbf16>)
// CHECK-NEXT:  %qr = form.rope %q, %positions {heads = 4 : i64, rotary = 32 : i64, theta = 1.000000e+04 : f64} : (tensor<2x128xbf16>, tensor<2xi32>) -> tensor<2x128xbf16>
// CHECK-NEXT:  %kr = form.rope %k, %positions {heads = 2 : i64, rotary = 16 : i64, theta = 1.000000e+04 : f64} : (tensor<2x64xbf16>, tensor<2xi32>) -> tensor<2x64xbf16>
// CHECK-NEXT:  %a = form.attention %qr, %kr, %v, %kc, %vc, %pages, %positions {heads = 4 : i64, kv_heads = 2 : i64, scale = 1.250000e-01 : f64} : (tensor<2x128xbf16>, tensor<2x64xbf16>, tensor<2x64xbf16>, tensor<8x16x2x32xbf16>, tensor<8x16x2x32xbf16>, tensor<2x4xi32>, tensor<2xi32>) -> tensor<2x128xbf16>
// CHECK-NEXT:  %o = form.product %a, %wo : (tensor<2x128xbf16>, tensor<64x128xbf16>) -> tensor<2x64xbf16>
// CHECK-NEXT:  %y, %sum = form.norm %o, %ln, %h {eps = 1.000000e-06 : f64, quantize = 1 : i64} : (tensor<2x64xbf16>, tensor<64xbf16>, tensor<2x64xbf16>) -> (tensor<2x64xi8>, tensor<2x64xbf16>)
// CHECK-NEXT:  %pair = form.gated_product %y, %wg, %wu : (tensor<2x64xi8>, tensor<96x64xbf16>, tensor<96x64xbf16>) -> tensor<2x96xbf16>
// CHECK-NEXT:  %g, %u = form.product %y, %wg, %wu : (tensor<2x64xi8>, tensor<96x64xbf16>, tensor<96x64xbf16>) -> (tensor<2x96xbf16>, tensor<2x96xbf16>)
// CHECK-NEXT:  %act = form.swiglu %g, %u : (tensor<2x96xbf16>, tensor<2x96xbf16>) -> tensor<2x96xbf16>
// CHECK-NEXT:  %gs = form.silu %g : (tensor<2x96xbf16>) -> tensor<2x96xbf16>
// CHECK-NEXT:  %prod = form.mul %gs, %u : (tensor<2x96xbf16>, tensor<2x96xbf16>) -> tensor<2x96xbf16>
// CHECK-NEXT:  %both = form.add %act, %prod {quantize = 2 : i64} : (tensor<2x96xbf16>, tensor<2x96xbf16>) -> tensor<2x96xi8>
// CHECK-NEXT:  %down = form.product %both, %wd {quantize = 1 : i64} : (tensor<2x96xi8>, tensor<64x96xbf16>) -> tensor<2x64xi8>
// CHECK-NEXT:  %gate = form.sigmoid %pair : (tensor<2x96xbf16>) -> tensor<2x96xbf16>
// CHECK-NEXT:  %f = form.norm %sum, %ln {eps = 1.000000e-05 : f64} : (tensor<2x64xbf16>, tensor<64xbf16>) -> tensor<2x64xbf16>
// CHECK-NEXT:  %fq = form.quantize %f {words = 2 : i64} : (tensor<2x64xbf16>) -> tensor<2x64xi8>
// CHECK-NEXT:  %logits = form.product %fq, %lm : (tensor<2x64xi8>, tensor<256x64xbf16>) -> tensor<2x256xf32>
// CHECK-NEXT:  %next = form.argmax %logits : (tensor<2x256xf32>) -> tensor<2xi32>
// CHECK-NEXT:  form.return %next, %down, %gate : tensor<2xi32>, tensor<2x64xi8>, tensor<2x96xbf16>
// CHECK-NEXT:  }

// -----

// Linear attention (batch 2, tokens 1): every state kind, conv (plain and with the L2 norm
// epilogue), both gate forms, the delta rule with per-key and per-head decay, the gated norm,
// and KDA whole.
form.step batch 2 tokens 1 {
  %tokens = form.input {role = "tokens"} : tensor<2xi32>
  %slots = form.input {role = "slots"} : tensor<2x1xi32>
  %table = form.weight {name = "embed", format = "bf16"} : tensor<64x64xbf16>
  %wq = form.weight {name = "q_proj", format = "bf16"} : tensor<32x64xbf16>
  %wk = form.weight {name = "k_proj", format = "bf16"} : tensor<32x64xbf16>
  %wv = form.weight {name = "v_proj", format = "bf16"} : tensor<32x64xbf16>
  %wcq = form.weight {name = "q_conv1d", format = "bf16"} : tensor<32x4xbf16>
  %wck = form.weight {name = "k_conv1d", format = "bf16"} : tensor<32x4xbf16>
  %wcv = form.weight {name = "v_conv1d", format = "bf16"} : tensor<32x4xbf16>
  %wfa = form.weight {name = "f_a_proj", format = "bf16"} : tensor<8x64xbf16>
  %wfb = form.weight {name = "f_b_proj", format = "bf16"} : tensor<32x8xbf16>
  %wb = form.weight {name = "b_proj", format = "bf16"} : tensor<2x64xbf16>
  %wg = form.weight {name = "g_proj", format = "bf16"} : tensor<32x64xbf16>
  %alog = form.weight {name = "A_log", format = "bf16"} : tensor<2xf32>
  %dtb = form.weight {name = "dt_bias", format = "bf16"} : tensor<32xf32>
  %wn = form.weight {name = "o_norm", format = "bf16"} : tensor<16xbf16>
  %conv = form.state {name = "conv_state", kind = "conv"} : tensor<4x96x3xbf16>
  %rec = form.state {name = "recurrent_state", kind = "recurrent"} : tensor<4x2x16x16xf32>
  %rec2 = form.state {name = "gdn_state", kind = "recurrent"} : tensor<4x2x16x32xf32>
  %kda_conv = form.state {name = "kda_conv_state", kind = "conv"} : tensor<4x96x3xbf16>
  %kda_rec = form.state {name = "kda_state", kind = "recurrent"} : tensor<4x2x16x16xf32>
  %h = form.embed %tokens, %table : (tensor<2xi32>, tensor<64x64xbf16>) -> tensor<2x64xbf16>
  %q, %k, %v = form.product %h, %wq, %wk, %wv : (tensor<2x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>) -> (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>)
  %cq = form.conv %q, %conv, %wcq, %slots {offset = 0 : i64, activation = "silu"} : tensor<2x32xbf16>, tensor<4x96x3xbf16>, tensor<32x4xbf16>, tensor<2x1xi32> -> tensor<2x32xbf16>
  %ck = form.conv %k, %conv, %wck, %slots {offset = 32 : i64, activation = "silu", norm_heads = 2 : i64, norm_eps = 1.0e-06 : f64} : tensor<2x32xbf16>, tensor<4x96x3xbf16>, tensor<32x4xbf16>, tensor<2x1xi32> -> tensor<2x32xbf16>
  %cv = form.conv %v, %conv, %wcv, %slots {offset = 64 : i64, activation = "none"} : tensor<2x32xbf16>, tensor<4x96x3xbf16>, tensor<32x4xbf16>, tensor<2x1xi32> -> tensor<2x32xbf16>
  %nq = form.l2norm %cq {heads = 2 : i64, eps = 1.0e-06 : f64} : (tensor<2x32xbf16>) -> tensor<2x32xbf16>
  %fa, %braw, %graw = form.product %h, %wfa, %wb, %wg : (tensor<2x64xbf16>, tensor<8x64xbf16>, tensor<2x64xbf16>, tensor<32x64xbf16>) -> (tensor<2x8xbf16>, tensor<2x2xbf16>, tensor<2x32xbf16>)
  %fg = form.product %fa, %wfb : (tensor<2x8xbf16>, tensor<32x8xbf16>) -> tensor<2x32xbf16>
  %decay = form.kda_gate %fg, %alog, %dtb {heads = 2 : i64, form = "lower_bound", lower_bound = -5.0 : f64} : (tensor<2x32xbf16>, tensor<2xf32>, tensor<32xf32>) -> tensor<2x32xf32>
  %soft = form.kda_gate %fg, %alog, %dtb {heads = 2 : i64, form = "softplus"} : (tensor<2x32xbf16>, tensor<2xf32>, tensor<32xf32>) -> tensor<2x32xf32>
  %beta = form.sigmoid %braw : (tensor<2x2xbf16>) -> tensor<2x2xbf16>
  %o = form.delta_rule %nq, %ck, %cv, %decay, %beta, %rec, %slots {heads = 2 : i64, key_heads = 2 : i64, scale = 0.25 : f64} : (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xf32>, tensor<2x2xbf16>, tensor<4x2x16x16xf32>, tensor<2x1xi32>) -> tensor<2x32xbf16>
  %o2 = form.delta_rule %nq, %ck, %cv, %beta, %beta, %rec2, %slots {heads = 2 : i64, key_heads = 1 : i64, scale = 0.25 : f64, quantize = 1 : i64} : (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x2xbf16>, tensor<2x2xbf16>, tensor<4x2x16x32xf32>, tensor<2x1xi32>) -> tensor<2x32xi8>
  %n = form.norm_gated %o, %graw, %wn {heads = 2 : i64, eps = 1.0e-05 : f64, activation = "sigmoid"} : (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<16xbf16>) -> tensor<2x32xbf16>
  %kda = form.kda qkv(%q, %k, %v) conv(%wcq, %wck, %wcv, %kda_conv) gate(%fa, %wfb, %alog, %dtb) beta %braw out_gate %graw norm %wn state %kda_rec slots %slots {heads = 2 : i64, form = "softplus", scale = 0.25 : f64, l2_eps = 1.0e-06 : f64, eps = 1.0e-05 : f64} : (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>) conv(tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<4x96x3xbf16>) gate(tensor<2x8xbf16>, tensor<32x8xbf16>, tensor<2xf32>, tensor<32xf32>) beta tensor<2x2xbf16> out_gate tensor<2x32xbf16> norm tensor<16xbf16> state tensor<4x2x16x16xf32> slots tensor<2x1xi32> -> tensor<2x32xbf16>
  form.return %n, %o2, %soft, %kda : tensor<2x32xbf16>, tensor<2x32xi8>, tensor<2x32xf32>, tensor<2x32xbf16>
}

// CHECK-LABEL: form.step batch 2 tokens 1 {
// CHECK-NEXT:  %tokens = form.input {role = "tokens"} : tensor<2xi32>
// CHECK-NEXT:  %slots = form.input {role = "slots"} : tensor<2x1xi32>
// CHECK-NEXT:  %table = form.weight {name = "embed", format = "bf16"} : tensor<64x64xbf16>
// CHECK-NEXT:  %wq = form.weight {name = "q_proj", format = "bf16"} : tensor<32x64xbf16>
// CHECK-NEXT:  %wk = form.weight {name = "k_proj", format = "bf16"} : tensor<32x64xbf16>
// CHECK-NEXT:  %wv = form.weight {name = "v_proj", format = "bf16"} : tensor<32x64xbf16>
// CHECK-NEXT:  %wcq = form.weight {name = "q_conv1d", format = "bf16"} : tensor<32x4xbf16>
// CHECK-NEXT:  %wck = form.weight {name = "k_conv1d", format = "bf16"} : tensor<32x4xbf16>
// CHECK-NEXT:  %wcv = form.weight {name = "v_conv1d", format = "bf16"} : tensor<32x4xbf16>
// CHECK-NEXT:  %wfa = form.weight {name = "f_a_proj", format = "bf16"} : tensor<8x64xbf16>
// CHECK-NEXT:  %wfb = form.weight {name = "f_b_proj", format = "bf16"} : tensor<32x8xbf16>
// CHECK-NEXT:  %wb = form.weight {name = "b_proj", format = "bf16"} : tensor<2x64xbf16>
// CHECK-NEXT:  %wg = form.weight {name = "g_proj", format = "bf16"} : tensor<32x64xbf16>
// CHECK-NEXT:  %alog = form.weight {name = "A_log", format = "bf16"} : tensor<2xf32>
// CHECK-NEXT:  %dtb = form.weight {name = "dt_bias", format = "bf16"} : tensor<32xf32>
// CHECK-NEXT:  %wn = form.weight {name = "o_norm", format = "bf16"} : tensor<16xbf16>
// CHECK-NEXT:  %conv = form.state {name = "conv_state", kind = "conv"} : tensor<4x96x3xbf16>
// CHECK-NEXT:  %rec = form.state {name = "recurrent_state", kind = "recurrent"} : tensor<4x2x16x16xf32>
// CHECK-NEXT:  %rec2 = form.state {name = "gdn_state", kind = "recurrent"} : tensor<4x2x16x32xf32>
// CHECK-NEXT:  %kda_conv = form.state {name = "kda_conv_state", kind = "conv"} : tensor<4x96x3xbf16>
// CHECK-NEXT:  %kda_rec = form.state {name = "kda_state", kind = "recurrent"} : tensor<4x2x16x16xf32>
// CHECK-NEXT:  %h = form.embed %tokens, %table : (tensor<2xi32>, tensor<64x64xbf16>) -> tensor<2x64xbf16>
// CHECK-NEXT:  %q, %k, %v = form.product %h, %wq, %wk, %wv : (tensor<2x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>) -> (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>)
// CHECK-NEXT:  %cq = form.conv %q, %conv, %wcq, %slots {offset = 0 : i64, activation = "silu"} : tensor<2x32xbf16>, tensor<4x96x3xbf16>, tensor<32x4xbf16>, tensor<2x1xi32> -> tensor<2x32xbf16>
// CHECK-NEXT:  %ck = form.conv %k, %conv, %wck, %slots {offset = 32 : i64, activation = "silu", norm_heads = 2 : i64, norm_eps = 1.000000e-06 : f64} : tensor<2x32xbf16>, tensor<4x96x3xbf16>, tensor<32x4xbf16>, tensor<2x1xi32> -> tensor<2x32xbf16>
// CHECK-NEXT:  %cv = form.conv %v, %conv, %wcv, %slots {offset = 64 : i64, activation = "none"} : tensor<2x32xbf16>, tensor<4x96x3xbf16>, tensor<32x4xbf16>, tensor<2x1xi32> -> tensor<2x32xbf16>
// CHECK-NEXT:  %nq = form.l2norm %cq {heads = 2 : i64, eps = 1.000000e-06 : f64} : (tensor<2x32xbf16>) -> tensor<2x32xbf16>
// CHECK-NEXT:  %fa, %braw, %graw = form.product %h, %wfa, %wb, %wg : (tensor<2x64xbf16>, tensor<8x64xbf16>, tensor<2x64xbf16>, tensor<32x64xbf16>) -> (tensor<2x8xbf16>, tensor<2x2xbf16>, tensor<2x32xbf16>)
// CHECK-NEXT:  %fg = form.product %fa, %wfb : (tensor<2x8xbf16>, tensor<32x8xbf16>) -> tensor<2x32xbf16>
// CHECK-NEXT:  %decay = form.kda_gate %fg, %alog, %dtb {heads = 2 : i64, form = "lower_bound", lower_bound = -5.000000e+00 : f64} : (tensor<2x32xbf16>, tensor<2xf32>, tensor<32xf32>) -> tensor<2x32xf32>
// CHECK-NEXT:  %soft = form.kda_gate %fg, %alog, %dtb {heads = 2 : i64, form = "softplus"} : (tensor<2x32xbf16>, tensor<2xf32>, tensor<32xf32>) -> tensor<2x32xf32>
// CHECK-NEXT:  %beta = form.sigmoid %braw : (tensor<2x2xbf16>) -> tensor<2x2xbf16>
// CHECK-NEXT:  %o = form.delta_rule %nq, %ck, %cv, %decay, %beta, %rec, %slots {heads = 2 : i64, key_heads = 2 : i64, scale = 2.500000e-01 : f64} : (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xf32>, tensor<2x2xbf16>, tensor<4x2x16x16xf32>, tensor<2x1xi32>) -> tensor<2x32xbf16>
// CHECK-NEXT:  %o2 = form.delta_rule %nq, %ck, %cv, %beta, %beta, %rec2, %slots {heads = 2 : i64, key_heads = 1 : i64, scale = 2.500000e-01 : f64, quantize = 1 : i64} : (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x2xbf16>, tensor<2x2xbf16>, tensor<4x2x16x32xf32>, tensor<2x1xi32>) -> tensor<2x32xi8>
// CHECK-NEXT:  %n = form.norm_gated %o, %graw, %wn {heads = 2 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<16xbf16>) -> tensor<2x32xbf16>
// CHECK-NEXT:  %kda = form.kda qkv(%q, %k, %v) conv(%wcq, %wck, %wcv, %kda_conv) gate(%fa, %wfb, %alog, %dtb) beta %braw out_gate %graw norm %wn state %kda_rec slots %slots {heads = 2 : i64, form = "softplus", scale = 2.500000e-01 : f64, l2_eps = 1.000000e-06 : f64, eps = 1.000000e-05 : f64} : (tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2x32xbf16>) conv(tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<4x96x3xbf16>) gate(tensor<2x8xbf16>, tensor<32x8xbf16>, tensor<2xf32>, tensor<32xf32>) beta tensor<2x2xbf16> out_gate tensor<2x32xbf16> norm tensor<16xbf16> state tensor<4x2x16x16xf32> slots tensor<2x1xi32> -> tensor<2x32xbf16>
// CHECK-NEXT:  form.return %n, %o2, %soft, %kda : tensor<2x32xbf16>, tensor<2x32xi8>, tensor<2x32xf32>, tensor<2x32xbf16>
// CHECK-NEXT:  }

// -----

// A speculative step (batch 2, tokens 2): conv with accepted counts and a bias, the delta rule
// with accepted counts, KDA with accepted counts, conv biases and the lower-bound gate.
form.step batch 2 tokens 2 {
  %tokens = form.input {role = "tokens"} : tensor<4xi32>
  %slots = form.input {role = "slots"} : tensor<2x3xi32>
  %accepted = form.input {role = "accepted"} : tensor<2xi32>
  %table = form.weight {name = "embed", format = "bf16"} : tensor<64x32xbf16>
  %wconv = form.weight {name = "conv1d", format = "bf16"} : tensor<32x4xbf16>
  %bconv = form.weight {name = "conv1d.bias", format = "bf16"} : tensor<32xbf16>
  %wfb = form.weight {name = "f_b_proj", format = "bf16"} : tensor<32x8xbf16>
  %alog = form.weight {name = "A_log", format = "bf16"} : tensor<2xf32>
  %dtb = form.weight {name = "dt_bias", format = "bf16"} : tensor<32xf32>
  %wn = form.weight {name = "o_norm", format = "bf16"} : tensor<16xbf16>
  %conv = form.state {name = "conv_state", kind = "conv"} : tensor<4x96x4xbf16>
  %rec = form.state {name = "recurrent_state", kind = "recurrent"} : tensor<4x2x16x16xf32>
  %x = form.embed %tokens, %table : (tensor<4xi32>, tensor<64x32xbf16>) -> tensor<4x32xbf16>
  %c = form.conv %x, %conv, %wconv, %slots accepted %accepted : tensor<2xi32> bias %bconv : tensor<32xbf16> {offset = 0 : i64, activation = "silu"} : tensor<4x32xbf16>, tensor<4x96x4xbf16>, tensor<32x4xbf16>, tensor<2x3xi32> -> tensor<4x32xbf16>
  %fa = form.part %x {heads = 4 : i64, unit = 8 : i64, offset = 0 : i64, length = 2 : i64} : (tensor<4x32xbf16>) -> tensor<4x8xbf16>
  %beta = form.part %x {heads = 2 : i64, unit = 16 : i64, offset = 15 : i64, length = 1 : i64} : (tensor<4x32xbf16>) -> tensor<4x2xbf16>
  %decay = form.kda_gate %c, %alog, %dtb {heads = 2 : i64, form = "softplus"} : (tensor<4x32xbf16>, tensor<2xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %o = form.delta_rule %c, %c, %x, %decay, %beta, %rec, %slots accepted %accepted {heads = 2 : i64, key_heads = 2 : i64, scale = 0.25 : f64} : (tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<4x32xf32>, tensor<4x2xbf16>, tensor<4x2x16x16xf32>, tensor<2x3xi32>, tensor<2xi32>) -> tensor<4x32xbf16>
  %kda = form.kda qkv(%x, %c, %o) conv(%wconv, %wconv, %wconv, %conv) gate(%fa, %wfb, %alog, %dtb) beta %beta out_gate %x norm %wn state %rec slots %slots accepted %accepted : tensor<2xi32> bias(%bconv, %bconv, %bconv : tensor<32xbf16>, tensor<32xbf16>, tensor<32xbf16>) {heads = 2 : i64, form = "lower_bound", lower_bound = -5.0 : f64, scale = 0.25 : f64, l2_eps = 1.0e-06 : f64, eps = 1.0e-05 : f64} : (tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>) conv(tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<4x96x4xbf16>) gate(tensor<4x8xbf16>, tensor<32x8xbf16>, tensor<2xf32>, tensor<32xf32>) beta tensor<4x2xbf16> out_gate tensor<4x32xbf16> norm tensor<16xbf16> state tensor<4x2x16x16xf32> slots tensor<2x3xi32> -> tensor<4x32xbf16>
  form.return %kda : tensor<4x32xbf16>
}

// CHECK-LABEL: form.step batch 2 tokens 2 {
// CHECK-NEXT:  %tokens = form.input {role = "tokens"} : tensor<4xi32>
// CHECK-NEXT:  %slots = form.input {role = "slots"} : tensor<2x3xi32>
// CHECK-NEXT:  %accepted = form.input {role = "accepted"} : tensor<2xi32>
// CHECK-NEXT:  %table = form.weight {name = "embed", format = "bf16"} : tensor<64x32xbf16>
// CHECK-NEXT:  %wconv = form.weight {name = "conv1d", format = "bf16"} : tensor<32x4xbf16>
// CHECK-NEXT:  %bconv = form.weight {name = "conv1d.bias", format = "bf16"} : tensor<32xbf16>
// CHECK-NEXT:  %wfb = form.weight {name = "f_b_proj", format = "bf16"} : tensor<32x8xbf16>
// CHECK-NEXT:  %alog = form.weight {name = "A_log", format = "bf16"} : tensor<2xf32>
// CHECK-NEXT:  %dtb = form.weight {name = "dt_bias", format = "bf16"} : tensor<32xf32>
// CHECK-NEXT:  %wn = form.weight {name = "o_norm", format = "bf16"} : tensor<16xbf16>
// CHECK-NEXT:  %conv = form.state {name = "conv_state", kind = "conv"} : tensor<4x96x4xbf16>
// CHECK-NEXT:  %rec = form.state {name = "recurrent_state", kind = "recurrent"} : tensor<4x2x16x16xf32>
// CHECK-NEXT:  %x = form.embed %tokens, %table : (tensor<4xi32>, tensor<64x32xbf16>) -> tensor<4x32xbf16>
// CHECK-NEXT:  %c = form.conv %x, %conv, %wconv, %slots accepted %accepted : tensor<2xi32> bias %bconv : tensor<32xbf16> {offset = 0 : i64, activation = "silu"} : tensor<4x32xbf16>, tensor<4x96x4xbf16>, tensor<32x4xbf16>, tensor<2x3xi32> -> tensor<4x32xbf16>
// CHECK-NEXT:  %fa = form.part %x {heads = 4 : i64, unit = 8 : i64, offset = 0 : i64, length = 2 : i64} : (tensor<4x32xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT:  %beta = form.part %x {heads = 2 : i64, unit = 16 : i64, offset = 15 : i64, length = 1 : i64} : (tensor<4x32xbf16>) -> tensor<4x2xbf16>
// CHECK-NEXT:  %decay = form.kda_gate %c, %alog, %dtb {heads = 2 : i64, form = "softplus"} : (tensor<4x32xbf16>, tensor<2xf32>, tensor<32xf32>) -> tensor<4x32xf32>
// CHECK-NEXT:  %o = form.delta_rule %c, %c, %x, %decay, %beta, %rec, %slots accepted %accepted {heads = 2 : i64, key_heads = 2 : i64, scale = 2.500000e-01 : f64} : (tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<4x32xf32>, tensor<4x2xbf16>, tensor<4x2x16x16xf32>, tensor<2x3xi32>, tensor<2xi32>) -> tensor<4x32xbf16>
// CHECK-NEXT:  %kda = form.kda qkv(%x, %c, %o) conv(%wconv, %wconv, %wconv, %conv) gate(%fa, %wfb, %alog, %dtb) beta %beta out_gate %x norm %wn state %rec slots %slots accepted %accepted : tensor<2xi32> bias(%bconv, %bconv, %bconv : tensor<32xbf16>, tensor<32xbf16>, tensor<32xbf16>) {heads = 2 : i64, form = "lower_bound", lower_bound = -5.000000e+00 : f64, scale = 2.500000e-01 : f64, l2_eps = 1.000000e-06 : f64, eps = 1.000000e-05 : f64} : (tensor<4x32xbf16>, tensor<4x32xbf16>, tensor<4x32xbf16>) conv(tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<32x4xbf16>, tensor<4x96x4xbf16>) gate(tensor<4x8xbf16>, tensor<32x8xbf16>, tensor<2xf32>, tensor<32xf32>) beta tensor<4x2xbf16> out_gate tensor<4x32xbf16> norm tensor<16xbf16> state tensor<4x2x16x16xf32> slots tensor<2x3xi32> -> tensor<4x32xbf16>
// CHECK-NEXT:  form.return %kda : tensor<4x32xbf16>
// CHECK-NEXT:  }

// -----

// Latent attention and mixtures (batch 1, tokens 1): a per-head part product, the latent
// cache, both latent paths, and mixtures with a correction bias, shared experts of 3 and 4
// weights, and scatter rows.
form.step batch 1 tokens 1 {
  %tokens = form.input {role = "tokens"} : tensor<1xi32>
  %positions = form.input {role = "positions"} : tensor<1xi32>
  %pages = form.input {role = "pages"} : tensor<1x4xi32>
  %table = form.weight {name = "embed", format = "bf16"} : tensor<64x64xbf16>
  %wq = form.weight {name = "q_proj", format = "bf16"} : tensor<96x64xbf16>
  %wkv = form.weight {name = "kv_a_proj", format = "bf16"} : tensor<80x64xbf16>
  %wkvb = form.weight {name = "kv_b_proj", format = "bf16"} : tensor<128x64xbf16>
  %wabs = form.weight {name = "kv_b_proj.k", format = "q8_0"} : tensor<128x32xbf16>
  %router = form.weight {name = "gate", format = "bf16"} : tensor<8x64xbf16>
  %corr = form.weight {name = "e_score_correction_bias", format = "bf16"} : tensor<8xf32>
  %eg = form.weight {name = "experts.gate_proj", format = "q8_0"} : tensor<8x32x64xbf16>
  %eu = form.weight {name = "experts.up_proj", format = "q8_0"} : tensor<8x32x64xbf16>
  %ed = form.weight {name = "experts.down_proj", format = "q8_0"} : tensor<8x64x32xbf16>
  %sg = form.weight {name = "shared_expert.gate_proj", format = "bf16"} : tensor<48x64xbf16>
  %su = form.weight {name = "shared_expert.up_proj", format = "bf16"} : tensor<48x64xbf16>
  %sd = form.weight {name = "shared_expert.down_proj", format = "bf16"} : tensor<64x48xbf16>
  %sgate = form.weight {name = "shared_expert_gate", format = "bf16"} : tensor<1x64xbf16>
  %cache = form.state {name = "latent_cache", kind = "latent"} : tensor<4x16x80xbf16>
  %x = form.embed %tokens, %table : (tensor<1xi32>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
  %qr, %kv = form.product %x, %wq, %wkv : (tensor<1x64xbf16>, tensor<96x64xbf16>, tensor<80x64xbf16>) -> (tensor<1x96xbf16>, tensor<1x80xbf16>)
  %qnope = form.product %qr, %wabs {heads = 2 : i64, unit = 48 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x96xbf16>, tensor<128x32xbf16>) -> tensor<1x128xbf16>
  %latent = form.part %kv {heads = 1 : i64, unit = 80 : i64, offset = 0 : i64, length = 64 : i64} : (tensor<1x80xbf16>) -> tensor<1x64xbf16>
  %krope = form.part %kv {heads = 1 : i64, unit = 80 : i64, offset = 64 : i64, length = 16 : i64} : (tensor<1x80xbf16>) -> tensor<1x16xbf16>
  %a = form.latent_attention %qr, %latent, %krope, %cache, %wkvb, %pages, %positions {heads = 2 : i64, nope = 32 : i64, rope = 16 : i64, lora = 64 : i64, v = 32 : i64, scale = 0.125 : f64} : (tensor<1x96xbf16>, tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<4x16x80xbf16>, tensor<128x64xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
  %b = form.latent_attention %qr, %latent, %krope, %cache, %wkvb, %pages, %positions {heads = 2 : i64, nope = 32 : i64, rope = 16 : i64, lora = 64 : i64, v = 32 : i64, scale = 0.125 : f64, path = "expanded"} : (tensor<1x96xbf16>, tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<4x16x80xbf16>, tensor<128x64xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
  %m = form.mixture %a, %router, %eg, %eu, %ed {top_k = 2 : i64, scoring = "softmax", renormalize = 0 : i64, routed_scaling = 1.0 : f64} : tensor<1x64xbf16>, tensor<8x64xbf16>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16> -> tensor<1x64xbf16>
  %ms = form.mixture %b, %router, %eg, %eu, %ed correction %corr : tensor<8xf32> shared(%sg, %su, %sd : tensor<48x64xbf16>, tensor<48x64xbf16>, tensor<64x48xbf16>) {top_k = 2 : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.5 : f64} : tensor<1x64xbf16>, tensor<8x64xbf16>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16> -> tensor<1x64xbf16>
  %mr = form.mixture %m, %router, %eg, %eu, %ed shared(%sg, %su, %sd, %sgate : tensor<48x64xbf16>, tensor<48x64xbf16>, tensor<64x48xbf16>, tensor<1x64xbf16>) rows %tokens : tensor<1xi32> {top_k = 1 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.0 : f64} : tensor<1x64xbf16>, tensor<8x64xbf16>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16> -> tensor<1x64xbf16>
  form.return %qnope, %ms, %mr : tensor<1x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
}

// CHECK-LABEL: form.step batch 1 tokens 1 {
// CHECK-NEXT:  %tokens = form.input {role = "tokens"} : tensor<1xi32>
// CHECK-NEXT:  %positions = form.input {role = "positions"} : tensor<1xi32>
// CHECK-NEXT:  %pages = form.input {role = "pages"} : tensor<1x4xi32>
// CHECK-NEXT:  %table = form.weight {name = "embed", format = "bf16"} : tensor<64x64xbf16>
// CHECK-NEXT:  %wq = form.weight {name = "q_proj", format = "bf16"} : tensor<96x64xbf16>
// CHECK-NEXT:  %wkv = form.weight {name = "kv_a_proj", format = "bf16"} : tensor<80x64xbf16>
// CHECK-NEXT:  %wkvb = form.weight {name = "kv_b_proj", format = "bf16"} : tensor<128x64xbf16>
// CHECK-NEXT:  %wabs = form.weight {name = "kv_b_proj.k", format = "q8_0"} : tensor<128x32xbf16>
// CHECK-NEXT:  %router = form.weight {name = "gate", format = "bf16"} : tensor<8x64xbf16>
// CHECK-NEXT:  %corr = form.weight {name = "e_score_correction_bias", format = "bf16"} : tensor<8xf32>
// CHECK-NEXT:  %eg = form.weight {name = "experts.gate_proj", format = "q8_0"} : tensor<8x32x64xbf16>
// CHECK-NEXT:  %eu = form.weight {name = "experts.up_proj", format = "q8_0"} : tensor<8x32x64xbf16>
// CHECK-NEXT:  %ed = form.weight {name = "experts.down_proj", format = "q8_0"} : tensor<8x64x32xbf16>
// CHECK-NEXT:  %sg = form.weight {name = "shared_expert.gate_proj", format = "bf16"} : tensor<48x64xbf16>
// CHECK-NEXT:  %su = form.weight {name = "shared_expert.up_proj", format = "bf16"} : tensor<48x64xbf16>
// CHECK-NEXT:  %sd = form.weight {name = "shared_expert.down_proj", format = "bf16"} : tensor<64x48xbf16>
// CHECK-NEXT:  %sgate = form.weight {name = "shared_expert_gate", format = "bf16"} : tensor<1x64xbf16>
// CHECK-NEXT:  %cache = form.state {name = "latent_cache", kind = "latent"} : tensor<4x16x80xbf16>
// CHECK-NEXT:  %x = form.embed %tokens, %table : (tensor<1xi32>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
// CHECK-NEXT:  %qr, %kv = form.product %x, %wq, %wkv : (tensor<1x64xbf16>, tensor<96x64xbf16>, tensor<80x64xbf16>) -> (tensor<1x96xbf16>, tensor<1x80xbf16>)
// CHECK-NEXT:  %qnope = form.product %qr, %wabs {heads = 2 : i64, unit = 48 : i64, offset = 0 : i64, length = 32 : i64} : (tensor<1x96xbf16>, tensor<128x32xbf16>) -> tensor<1x128xbf16>
// CHECK-NEXT:  %latent = form.part %kv {heads = 1 : i64, unit = 80 : i64, offset = 0 : i64, length = 64 : i64} : (tensor<1x80xbf16>) -> tensor<1x64xbf16>
// CHECK-NEXT:  %krope = form.part %kv {heads = 1 : i64, unit = 80 : i64, offset = 64 : i64, length = 16 : i64} : (tensor<1x80xbf16>) -> tensor<1x16xbf16>
// CHECK-NEXT:  %a = form.latent_attention %qr, %latent, %krope, %cache, %wkvb, %pages, %positions {heads = 2 : i64, nope = 32 : i64, rope = 16 : i64, lora = 64 : i64, v = 32 : i64, scale = 1.250000e-01 : f64} : (tensor<1x96xbf16>, tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<4x16x80xbf16>, tensor<128x64xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
// CHECK-NEXT:  %b = form.latent_attention %qr, %latent, %krope, %cache, %wkvb, %pages, %positions {heads = 2 : i64, nope = 32 : i64, rope = 16 : i64, lora = 64 : i64, v = 32 : i64, scale = 1.250000e-01 : f64, path = "expanded"} : (tensor<1x96xbf16>, tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<4x16x80xbf16>, tensor<128x64xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
// CHECK-NEXT:  %m = form.mixture %a, %router, %eg, %eu, %ed {top_k = 2 : i64, scoring = "softmax", renormalize = 0 : i64, routed_scaling = 1.000000e+00 : f64} : tensor<1x64xbf16>, tensor<8x64xbf16>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16> -> tensor<1x64xbf16>
// CHECK-NEXT:  %ms = form.mixture %b, %router, %eg, %eu, %ed correction %corr : tensor<8xf32> shared(%sg, %su, %sd : tensor<48x64xbf16>, tensor<48x64xbf16>, tensor<64x48xbf16>) {top_k = 2 : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.500000e+00 : f64} : tensor<1x64xbf16>, tensor<8x64xbf16>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16> -> tensor<1x64xbf16>
// CHECK-NEXT:  %mr = form.mixture %m, %router, %eg, %eu, %ed shared(%sg, %su, %sd, %sgate : tensor<48x64xbf16>, tensor<48x64xbf16>, tensor<64x48xbf16>, tensor<1x64xbf16>) rows %tokens : tensor<1xi32> {top_k = 1 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.000000e+00 : f64} : tensor<1x64xbf16>, tensor<8x64xbf16>, tensor<8x32x64xbf16>, tensor<8x32x64xbf16>, tensor<8x64x32xbf16> -> tensor<1x64xbf16>
// CHECK-NEXT:  form.return %qnope, %ms, %mr : tensor<1x128xbf16>, tensor<1x64xbf16>, tensor<1x64xbf16>
// CHECK-NEXT:  }
