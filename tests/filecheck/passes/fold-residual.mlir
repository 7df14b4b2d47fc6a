// RUN: lanec opt %s --split-input-file -p fold-residual | filecheck %s

// Fires: the add feeding the norm becomes its residual; the add's other reader takes the sum.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %f = form.weight {name = "embed2", format = "bf16"} : tensor<32x64xbf16>
    %w = form.weight {name = "model.layers.4.post_attention_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %b = form.embed %t, %f : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.add %a, %b : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %y = form.norm %h, %w {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %z = form.mul %y, %h : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
    form.return %z : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-residual", op = "norm %y (post_attention_layernorm)", taken = true, reason = "the add before it folded into the norm as its residual", layer = 4 : i64
// CHECK-NOT: form.add
// CHECK: %y, %h = form.norm %a, %w, %b {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>, tensor<1x64xbf16>) -> (tensor<1x64xbf16>, tensor<1x64xbf16>)
// CHECK-NEXT: %z = form.mul %y, %h

// -----

// Held back: the add quantizes its result (the norm would read int8).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w = form.weight {name = "norm", format = "bf16"} : tensor<64xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %h = form.add %a, %a {quantize = 1 : i64} : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xi8>
    %y = form.norm %h, %w {eps = 1.000000e-05 : f64} : (tensor<1x64xi8>, tensor<64xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-residual", op = "norm %y (norm)", taken = false, reason = "the add %h quantizes its result: the norm reads int8"
// CHECK: %h = form.add %a, %a
// CHECK-NEXT: %y = form.norm %h, %w
