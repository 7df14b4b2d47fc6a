// RUN: lanec opt %s --split-input-file -p fold-norm-into-router | filecheck %s

// Fires (fold_router_norms, on by default): the norm's one reader is a mixture of one row (its fused router).
builtin.module attributes {lane.shim = {fold_router_norms = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w = form.weight {name = "model.layers.1.post_attention_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<64x64xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<64x32x64xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<64x32x64xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<64x64x32xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %y = form.norm %a, %w {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %m = form.mixture %y, %router, %eg, %eu, %ed {top_k = 4 : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.500000e+00 : f64} : tensor<1x64xbf16>, tensor<64x64xbf16>, tensor<64x32x64xbf16>, tensor<64x32x64xbf16>, tensor<64x64x32xbf16> -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-norm-into-router", op = "norm %y (post_attention_layernorm)", taken = true, reason = "runs in the prologue of its one reader's router, mixture %m (moe.gate, moe.experts.w1, moe.experts.w3, +1 more): 1 row(s) of 64, 4 CTA(s) a cluster, each norming its 1 row(s) itself (one launch fewer)"
// CHECK: %y = form.norm %a, %w {eps = 1.000000e-05 : f64, prologue = "router"}

// -----

// Held back: at 64 rows the router's logits are a gemm_tc launch, so no fused router takes the norm.
builtin.module attributes {lane.shim = {fold_router_norms = true}} {
  form.step batch 64 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<64xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x256xbf16>
    %w = form.weight {name = "model.layers.1.post_attention_layernorm.weight", format = "bf16"} : tensor<256xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<64x256xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<64x32x256xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<64x32x256xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<64x256x32xbf16>
    %a = form.embed %t, %e : (tensor<64xi32>, tensor<32x256xbf16>) -> tensor<64x256xbf16>
    %y = form.norm %a, %w {eps = 1.000000e-05 : f64} : (tensor<64x256xbf16>, tensor<256xbf16>) -> tensor<64x256xbf16>
    %m = form.mixture %y, %router, %eg, %eu, %ed {top_k = 4 : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.500000e+00 : f64} : tensor<64x256xbf16>, tensor<64x256xbf16>, tensor<64x32x256xbf16>, tensor<64x32x256xbf16>, tensor<64x256x32xbf16> -> tensor<64x256xbf16>
    form.return %m : tensor<64x256xbf16>
  }
}

// CHECK: rule = "fold-norm-into-router", op = "norm %y (post_attention_layernorm)", taken = false, reason = "64 rows: the router's logits are a gemm_tc launch (ROUTER_GEMM_ROWS), no fused router to take the norm"
// CHECK: %y = form.norm %a, %w {eps = 1.000000e-05 : f64} :

// -----

// Off under fold_router_norms = false: the rule decides nothing.
builtin.module attributes {lane.shim = {fold_router_norms = false}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w = form.weight {name = "model.layers.1.post_attention_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %router = form.weight {name = "model.layers.1.moe.gate.weight", format = "bf16"} : tensor<64x64xbf16>
    %eg = form.weight {name = "model.layers.1.moe.experts.w1", format = "bf16"} : tensor<64x32x64xbf16>
    %eu = form.weight {name = "model.layers.1.moe.experts.w3", format = "bf16"} : tensor<64x32x64xbf16>
    %ed = form.weight {name = "model.layers.1.moe.experts.w2", format = "bf16"} : tensor<64x64x32xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %y = form.norm %a, %w {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %m = form.mixture %y, %router, %eg, %eu, %ed {top_k = 4 : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.500000e+00 : f64} : tensor<1x64xbf16>, tensor<64x64xbf16>, tensor<64x32x64xbf16>, tensor<64x32x64xbf16>, tensor<64x64x32xbf16> -> tensor<1x64xbf16>
    form.return %m : tensor<1x64xbf16>
  }
}

// CHECK-NOT: fold-norm-into-router
// CHECK-NOT: prologue
// CHECK: %y = form.norm %a, %w {eps = 1.000000e-05 : f64} :
