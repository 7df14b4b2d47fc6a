// RUN: lanec opt %s --split-input-file -p 'shard{ranks=2 rank=1}' | filecheck %s

// Fires: a gated MLP over 2 ranks: gate and up column-parallel (rank 1's rows), down row-parallel
// (its inputs), then an all_reduce; the norm and its weight stay whole.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.layers.0.norm", format = "bf16"} : tensor<64xbf16>
    %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<128x64xbf16>
    %wu = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<128x64xbf16>
    %wd = form.weight {name = "model.layers.0.mlp.down_proj.weight", format = "bf16"} : tensor<64x128xbf16>
    %h = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %x = form.norm %h, %n {eps = 1.0e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %g = form.product %x, %wg : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %u = form.product %x, %wu : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %a = form.swiglu %g, %u : (tensor<1x128xbf16>, tensor<1x128xbf16>) -> tensor<1x128xbf16>
    %y = form.product %a, %wd : (tensor<1x128xbf16>, tensor<64x128xbf16>) -> tensor<1x64xbf16>
    %o = form.add %h, %y : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
    form.return %o : tensor<1x64xbf16>
  }
}

// CHECK: "layer 0   product %g (mlp.gate_proj): column-parallel: 64 of 128 outputs a rank"
// CHECK-SAME: "layer 0   product %y (mlp.down_proj): row-parallel: 64 of 128 inputs a rank, then all_reduce"
// CHECK-SAME: "layer 0   all_reduce %y: the sum over 2 ranks, the one-shot kernel (128 bytes read from every rank's memory; NCCL's beside it, LANEC_ALL_REDUCE picks)"
// CHECK: %n = form.weight {name = "model.layers.0.norm", format = "bf16"} : tensor<64xbf16>
// CHECK: %wg = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16", shard = "dim 0 part 1 of 2"} : tensor<64x64xbf16>
// CHECK: %wd = form.weight {name = "model.layers.0.mlp.down_proj.weight", format = "bf16", shard = "dim 1 part 1 of 2"} : tensor<64x64xbf16>
// CHECK: %a = form.swiglu %g, %u : (tensor<1x64xbf16>, tensor<1x64xbf16>) -> tensor<1x64xbf16>
// CHECK: %y_partial = form.product %a, %wd : (tensor<1x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
// CHECK-NEXT: %y = form.all_reduce %y_partial {ranks = 2 : i64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
// CHECK-NEXT: %o = form.add %h, %y

// -----

// Held back: products of a whole activation into a whole one (a LoRA pair) stay replicated, with
// no all_reduce.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wa = form.weight {name = "model.layers.0.q_a_proj.weight", format = "bf16"} : tensor<16x64xbf16>
    %n = form.weight {name = "model.layers.0.q_a_layernorm.weight", format = "bf16"} : tensor<16xbf16>
    %h = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %h, %wa : (tensor<1x64xbf16>, tensor<16x64xbf16>) -> tensor<1x16xbf16>
    %r = form.norm %q, %n {eps = 1.0e-05 : f64} : (tensor<1x16xbf16>, tensor<16xbf16>) -> tensor<1x16xbf16>
    form.return %r : tensor<1x16xbf16>
  }
}

// CHECK: "layer 0   product %q (q_a_proj): replicated"
// CHECK: %wa = form.weight {name = "model.layers.0.q_a_proj.weight", format = "bf16"} : tensor<16x64xbf16>
// CHECK: %q = form.product %h, %wa : (tensor<1x64xbf16>, tensor<16x64xbf16>) -> tensor<1x16xbf16>
// CHECK-NOT: form.all_reduce
