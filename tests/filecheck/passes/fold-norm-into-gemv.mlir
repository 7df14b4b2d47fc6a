// RUN: lanec opt %s --split-input-file -p fold-norm-into-gemv | filecheck %s

// Fires under fold_norms: the norm's one reader is a plain bf16 product of one row.
builtin.module attributes {lane.shim = {fold_norms = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w = form.weight {name = "model.layers.2.input_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %q = form.weight {name = "model.layers.2.self_attn.q_proj.weight", format = "bf16"} : tensor<128x64xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %y = form.norm %a, %w {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %p = form.product %y, %q : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    form.return %p : tensor<1x128xbf16>
  }
}

// CHECK: rule = "fold-norm-into-gemv", op = "norm %y (input_layernorm)", taken = true, reason = "runs in the prologue of its one reader's gemv, product %p (self_attn.q_proj): 1 row(s) of 64
// CHECK: %y = form.norm %a, %w {eps = 1.000000e-05 : f64, prologue = "gemv"}

// -----

// Held back: 4 rows take the tensor cores, whose fragments the prologue does not scale.
builtin.module attributes {lane.shim = {fold_norms = true}} {
  form.step batch 4 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<4xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w = form.weight {name = "model.norm.weight", format = "bf16"} : tensor<64xbf16>
    %q = form.weight {name = "lm_head.weight", format = "bf16"} : tensor<128x64xbf16>
    %a = form.embed %t, %e : (tensor<4xi32>, tensor<32x64xbf16>) -> tensor<4x64xbf16>
    %y = form.norm %a, %w {eps = 1.000000e-05 : f64} : (tensor<4x64xbf16>, tensor<64xbf16>) -> tensor<4x64xbf16>
    %p = form.product %y, %q : (tensor<4x64xbf16>, tensor<128x64xbf16>) -> tensor<4x128xbf16>
    form.return %p : tensor<4x128xbf16>
  }
}

// CHECK: rule = "fold-norm-into-gemv", op = "norm %y (model.norm)", taken = false, reason = "norm prologue: 4 rows are above the 3 of the CUDA-core path
// CHECK: %y = form.norm %a, %w {eps = 1.000000e-05 : f64} :

// -----

// On by default: without a lane.shim the knob is on and the rule folds.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w = form.weight {name = "model.norm.weight", format = "bf16"} : tensor<64xbf16>
    %q = form.weight {name = "lm_head.weight", format = "bf16"} : tensor<128x64xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %y = form.norm %a, %w {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %p = form.product %y, %q : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    form.return %p : tensor<1x128xbf16>
  }
}

// CHECK: rule = "fold-norm-into-gemv", op = "norm %y (model.norm)", taken = true
// CHECK: %y = form.norm %a, %w {eps = 1.000000e-05 : f64, prologue = "gemv"}

// -----

// Off under fold_norms = false (--no-fold-norms): the rule decides nothing.
builtin.module attributes {lane.shim = {fold_norms = false}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w = form.weight {name = "model.norm.weight", format = "bf16"} : tensor<64xbf16>
    %q = form.weight {name = "lm_head.weight", format = "bf16"} : tensor<128x64xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %y = form.norm %a, %w {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %p = form.product %y, %q : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    form.return %p : tensor<1x128xbf16>
  }
}

// CHECK-NOT: fold-norm-into-gemv
// CHECK-NOT: prologue
// CHECK: %y = form.norm %a, %w {eps = 1.000000e-05 : f64} :

// -----

// Held back: the norm reads an all-reduce's sum, which the all-reduce's one-shot launch normalizes instead.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %d = form.weight {name = "model.layers.0.mlp.down_proj.weight", format = "bf16", shard = "dim 1 part 0 of 2"} : tensor<64x64xbf16>
    %n = form.weight {name = "model.layers.1.input_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %q = form.weight {name = "model.layers.1.self_attn.q_proj.weight", format = "bf16"} : tensor<128x64xbf16>
    %h = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %p = form.product %h, %d : (tensor<1x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
    %r = form.all_reduce %p {ranks = 2 : i64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %x, %s = form.norm %h, %n, %r {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>, tensor<1x64xbf16>) -> (tensor<1x64xbf16>, tensor<1x64xbf16>)
    %o = form.product %x, %q : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    form.return %o, %s : tensor<1x128xbf16>, tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-norm-into-gemv", op = "norm %x (input_layernorm)", taken = false, reason = "it reads an all-reduce's sum
// CHECK: %x, %s = form.norm %h, %n, %r {eps = 1.000000e-05 : f64} :
