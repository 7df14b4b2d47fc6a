// RUN: not lanec opt %s -p hold-mixture-shared 2>&1 | filecheck %s

// Held back: a routed-only mixture (no shared expert) that scatters its result to rows a
// parameter names. The mixture never writes at a row a parameter names, and the form has no
// scatter to split it into: a one-line error naming the fact.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<4x64xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<4x32x64xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<4x32x64xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<4x64x32xbf16>
    %rows = form.input {role = "positions"} : tensor<1xi32>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %m = form.mixture %x, %router, %eg, %eu, %ed rows %rows : tensor<1xi32> {top_k = 2 : i64, scoring = "softmax", renormalize = 1 : i64, routed_scaling = 1.500000e+00 : f64} : tensor<1x64xbf16>, tensor<4x64xbf16>, tensor<4x32x64xbf16>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16> -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK: error: mixture %m (moe.gate, moe.experts.w1, moe.experts.w3, +1 more): the mixture scatters its result to rows a parameter names (no fused scatter), and the form has no scatter to split it into
// CHECK-NOT: Traceback
