// RUN: lanec opt %s --split-input-file -p fold-argmax-into-gemv | filecheck %s

// Fires under fold_argmax: the argmax reads a plain bf16 product of one row (the lm head).
builtin.module attributes {lane.shim = {fold_argmax = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %q = form.weight {name = "lm_head.weight", format = "bf16"} : tensor<1000x64xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %l = form.product %a, %q : (tensor<1x64xbf16>, tensor<1000x64xbf16>) -> tensor<1x1000xbf16>
    %c = form.argmax %l : (tensor<1x1000xbf16>) -> tensor<1xi32>
    form.return %l, %c : tensor<1x1000xbf16>, tensor<1xi32>
  }
}

// CHECK: rule = "fold-argmax-into-gemv", op = "argmax %c", taken = true, reason = "runs in the epilogue of the gemv that writes its input, product %l (lm_head): 1 row(s) of 1000 values
// CHECK: %c = form.argmax %l {epilogue = "gemv"}

// -----

// Held back: 4 rows take the tensor cores, whose outputs lie in MMA fragments.
builtin.module attributes {lane.shim = {fold_argmax = true}} {
  form.step batch 4 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<4xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %q = form.weight {name = "lm_head.weight", format = "bf16"} : tensor<1000x64xbf16>
    %a = form.embed %t, %e : (tensor<4xi32>, tensor<32x64xbf16>) -> tensor<4x64xbf16>
    %l = form.product %a, %q : (tensor<4x64xbf16>, tensor<1000x64xbf16>) -> tensor<4x1000xbf16>
    %c = form.argmax %l : (tensor<4x1000xbf16>) -> tensor<4xi32>
    form.return %c : tensor<4xi32>
  }
}

// CHECK: rule = "fold-argmax-into-gemv", op = "argmax %c", taken = false, reason = "argmax epilogue: 4 rows take the tensor cores
// CHECK: %c = form.argmax %l :

// -----

// Held back: the argmax reads an embedding, which no gemv writes.
builtin.module attributes {lane.shim = {fold_argmax = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %c = form.argmax %a : (tensor<1x64xbf16>) -> tensor<1xi32>
    form.return %c : tensor<1xi32>
  }
}

// CHECK: rule = "fold-argmax-into-gemv", op = "argmax %c", taken = false, reason = "its input comes from embed, not a product: only gemv takes an argmax in its epilogue"

// -----

// Off by default: without the knob the rule decides nothing.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %q = form.weight {name = "lm_head.weight", format = "bf16"} : tensor<1000x64xbf16>
    %a = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %l = form.product %a, %q : (tensor<1x64xbf16>, tensor<1000x64xbf16>) -> tensor<1x1000xbf16>
    %c = form.argmax %l : (tensor<1x1000xbf16>) -> tensor<1xi32>
    form.return %c : tensor<1xi32>
  }
}

// CHECK-NOT: fold-argmax-into-gemv
// CHECK: %c = form.argmax %l :
