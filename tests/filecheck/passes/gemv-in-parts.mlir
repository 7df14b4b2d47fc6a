// RUN: lanec opt %s --split-input-file -p gemv-in-parts | filecheck %s

// Fires: a decode step's rows (1, at most the 32 a gemv launch takes): the products of one
// activation become one GEMV in parts.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "model.layers.0.q", format = "bf16"} : tensor<128x64xbf16>
    %wk = form.weight {name = "model.layers.0.k", format = "bf16"} : tensor<64x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    %q = form.product %x, %wq : (tensor<1x64xbf16>, tensor<128x64xbf16>) -> tensor<1x128xbf16>
    %k = form.product %x, %wk : (tensor<1x64xbf16>, tensor<64x64xbf16>) -> tensor<1x64xbf16>
    form.return %q, %k : tensor<1x128xbf16>, tensor<1x64xbf16>
  }
}

// CHECK: rule = "gemv-in-parts", op = "product %q (q)", taken = true, reason = "2 products of one activation (%q, %k) as one GEMV in parts (gemv): 1 rows are at most the 32 a GEMV launch takes", layer = 0 : i64
// CHECK: %q, %k = form.product %x, %wq, %wk

// -----

// Fires at the boundary: 32 rows (2 requests of 16 tokens) are the most a gemv launch takes.
builtin.module {
  form.step batch 2 tokens 16 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "q", format = "bf16"} : tensor<128x64xbf16>
    %wk = form.weight {name = "k", format = "bf16"} : tensor<64x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %q = form.product %x, %wq : (tensor<32x64xbf16>, tensor<128x64xbf16>) -> tensor<32x128xbf16>
    %k = form.product %x, %wk : (tensor<32x64xbf16>, tensor<64x64xbf16>) -> tensor<32x64xbf16>
    form.return %q, %k : tensor<32x128xbf16>, tensor<32x64xbf16>
  }
}

// CHECK: rule = "gemv-in-parts", op = "product %q (q)", taken = true, reason = "2 products of one activation (%q, %k) as one GEMV in parts (gemv): 32 rows are at most the 32 a GEMV launch takes"
// CHECK: %q, %k = form.product %x, %wq, %wk

// -----

// Held back: 33 rows (3 requests of 11 tokens) are above the gemv's 32: left to merge-products.
builtin.module {
  form.step batch 3 tokens 11 {
    %t = form.input {role = "tokens"} : tensor<33xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "q", format = "bf16"} : tensor<128x64xbf16>
    %wk = form.weight {name = "k", format = "bf16"} : tensor<64x64xbf16>
    %x = form.embed %t, %e : (tensor<33xi32>, tensor<32x64xbf16>) -> tensor<33x64xbf16>
    %q = form.product %x, %wq : (tensor<33x64xbf16>, tensor<128x64xbf16>) -> tensor<33x128xbf16>
    %k = form.product %x, %wk : (tensor<33x64xbf16>, tensor<64x64xbf16>) -> tensor<33x64xbf16>
    form.return %q, %k : tensor<33x128xbf16>, tensor<33x64xbf16>
  }
}

// CHECK: rule = "gemv-in-parts", op = "product %q (q)", taken = false, reason = "2 products of one activation (%q, %k) left to merge-products: 33 rows are above the 32 a gemv launch takes and the products are not a batch's"
// CHECK: %q = form.product %x, %wq
// CHECK-NEXT: %k = form.product %x, %wk

// -----

// Fires above the row limit where the products are a batch's (each row its own sequence).
builtin.module attributes {lane.shim = {batch_products = true}} {
  form.step batch 32 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<32xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %wq = form.weight {name = "q", format = "bf16"} : tensor<128x64xbf16>
    %wk = form.weight {name = "k", format = "bf16"} : tensor<64x64xbf16>
    %x = form.embed %t, %e : (tensor<32xi32>, tensor<32x64xbf16>) -> tensor<32x64xbf16>
    %q = form.product %x, %wq : (tensor<32x64xbf16>, tensor<128x64xbf16>) -> tensor<32x128xbf16>
    %k = form.product %x, %wk : (tensor<32x64xbf16>, tensor<64x64xbf16>) -> tensor<32x64xbf16>
    form.return %q, %k : tensor<32x128xbf16>, tensor<32x64xbf16>
  }
}

// CHECK: rule = "gemv-in-parts", op = "product %q (q)", taken = true, reason = "2 products of one activation (%q, %k) as one GEMV in parts (gemv): the products are a batch's"
// CHECK: %q, %k = form.product %x, %wq, %wk
