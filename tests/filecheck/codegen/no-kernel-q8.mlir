// RUN: not lanec opt %s -p lower-to-lane 2>&1 | filecheck %s

// Products by q8_0 checkpoint rows need the quantized GEMV, which the lane does not link yet: the
// product is named as an op without a kernel (not a crash, not a silent bf16 read).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "e", format = "bf16"} : tensor<64x256xbf16>
    %w = form.weight {name = "w", format = "q8_0"} : tensor<64x256xbf16>
    %h = form.embed %t, %e : (tensor<1xi32>, tensor<64x256xbf16>) -> tensor<1x256xbf16>
    %y = form.product %h, %w : (tensor<1x256xbf16>, tensor<64x256xbf16>) -> tensor<1x64xbf16>
    form.return %y : tensor<1x64xbf16>
  }
}

// CHECK: no lane kernel for: form.product (quantized) x1
