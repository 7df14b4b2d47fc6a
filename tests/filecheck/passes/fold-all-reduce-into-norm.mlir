// RUN: lanec opt %s --split-input-file -p fold-all-reduce-into-norm | filecheck %s

// Fires: a row-parallel product's all-reduce read only by the norm right after it (fold-residual
// made the add its residual): all_reduce_norm sums it in the norm's launch.
builtin.module {
  form.step batch 3 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<3xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %w = form.weight {name = "model.layers.0.mlp.down_proj.weight", format = "bf16", shard = "dim 1 part 0 of 2"} : tensor<64x64xbf16>
    %n = form.weight {name = "model.layers.1.input_layernorm.weight", format = "bf16"} : tensor<64xbf16>
    %h = form.embed %t, %e : (tensor<3xi32>, tensor<32x64xbf16>) -> tensor<3x64xbf16>
    %p = form.product %h, %w : (tensor<3x64xbf16>, tensor<64x64xbf16>) -> tensor<3x64xbf16>
    %y = form.all_reduce %p {ranks = 2 : i64} : (tensor<3x64xbf16>) -> tensor<3x64xbf16>
    %x, %s = form.norm %h, %n, %y {eps = 1.000000e-05 : f64} : (tensor<3x64xbf16>, tensor<64xbf16>, tensor<3x64xbf16>) -> (tensor<3x64xbf16>, tensor<3x64xbf16>)
    form.return %x, %s : tensor<3x64xbf16>, tensor<3x64xbf16>
  }
}

// CHECK: rule = "fold-all-reduce-into-norm", op = "all_reduce %y", taken = true, reason = "sums in the launch of norm %x (input_layernorm) on the one-shot engine (all_reduce_norm: a CTA a row of 64, 384 bytes from every rank's memory)
// CHECK: %y = form.all_reduce %p {ranks = 2 : i64, into = "norm"}
// CHECK-NEXT: %x, %s = form.norm %h, %n, %y

// -----

// Held back: the all-reduce's total has a second reader (the step returns it), so it must reach memory.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %n = form.weight {name = "model.norm.weight", format = "bf16"} : tensor<64xbf16>
    %h = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %y = form.all_reduce %h {ranks = 2 : i64} : (tensor<1x64xbf16>) -> tensor<1x64xbf16>
    %x = form.norm %y, %n {eps = 1.000000e-05 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    form.return %x, %y : tensor<1x64xbf16>, tensor<1x64xbf16>
  }
}

// CHECK: rule = "fold-all-reduce-into-norm", op = "all_reduce %y", taken = false, reason = "its readers are norm, return: only a norm right after it, its only reader, sums it in its kernel, reading it once"
// CHECK: %y = form.all_reduce %h {ranks = 2 : i64} :

// -----

// Held back: 600 rows of 1024 bf16 values are 1.2 MB, past the one-shot's 1 MiB.
builtin.module {
  form.step batch 600 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<600xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x1024xbf16>
    %n = form.weight {name = "model.norm.weight", format = "bf16"} : tensor<1024xbf16>
    %h = form.embed %t, %e : (tensor<600xi32>, tensor<32x1024xbf16>) -> tensor<600x1024xbf16>
    %y = form.all_reduce %h {ranks = 2 : i64} : (tensor<600x1024xbf16>) -> tensor<600x1024xbf16>
    %x = form.norm %y, %n {eps = 1.000000e-05 : f64} : (tensor<600x1024xbf16>, tensor<1024xbf16>) -> tensor<600x1024xbf16>
    form.return %x : tensor<600x1024xbf16>
  }
}

// CHECK: rule = "fold-all-reduce-into-norm", op = "all_reduce %y", taken = false, reason = "the one-shot: 1228800 bytes pass the one-shot's limit of 1048576"
// CHECK: %y = form.all_reduce %h {ranks = 2 : i64} :
