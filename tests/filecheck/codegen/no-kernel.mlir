// RUN: not lanec opt %s -p lower-to-lane 2>&1 | filecheck %s

// An op the lane has no kernel for is named, with why and how many there are; nothing is skipped.
// A product whose weight rows are an activation: every product kernel loads its weights before
// the PDL wait, which an activation (the predecessor's output) cannot be.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %table = form.weight {name = "embed", format = "bf16"} : tensor<64x256xbf16>
    %h = form.embed %t, %table : (tensor<1xi32>, tensor<64x256xbf16>) -> tensor<1x256xbf16>
    %p = form.product %h, %h : (tensor<1x256xbf16>, tensor<1x256xbf16>) -> tensor<1x1xbf16>
    %q = form.product %h, %h : (tensor<1x256xbf16>, tensor<1x256xbf16>) -> tensor<1x1xbf16>
    form.return %h : tensor<1x256xbf16>
  }
}

// CHECK: no lane kernel for: form.product (weights that are an activation: kernels load weights before the PDL wait) x2
