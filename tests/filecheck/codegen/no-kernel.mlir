// RUN: not lanec opt %s -p lower-to-lane 2>&1 | filecheck %s

// An op the lane has no kernel for is named, with how many there are; nothing is skipped.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %table = form.weight {name = "embed", format = "bf16"} : tensor<64x256xbf16>
    %h = form.embed %t, %table : (tensor<1xi32>, tensor<64x256xbf16>) -> tensor<1x256xbf16>
    %p = form.quantize %h {words = 2 : i64} : (tensor<1x256xbf16>) -> tensor<1x256xi8>
    %q = form.quantize %h {words = 1 : i64} : (tensor<1x256xbf16>) -> tensor<1x256xi8>
    form.return %h : tensor<1x256xbf16>
  }
}

// CHECK: no lane kernel for: form.quantize x2
