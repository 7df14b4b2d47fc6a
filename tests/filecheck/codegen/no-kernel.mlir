// RUN: not lanec opt %s -p lower-to-lane 2>&1 | filecheck %s

// An op the lane has no kernel for is named, with how many there are; nothing is skipped.
builtin.module {
  form.step batch 1 tokens 1 {
    %x = form.input {role = "positions"} : tensor<1xi32>
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %table = form.weight {name = "embed", format = "bf16"} : tensor<64x256xbf16>
    %h = form.embed %t, %table : (tensor<1xi32>, tensor<64x256xbf16>) -> tensor<1x256xbf16>
    %r = form.rope %h, %x {heads = 2 : i64, rotary = 64 : i64, theta = 1.000000e+04 : f64} : (tensor<1x256xbf16>, tensor<1xi32>) -> tensor<1x256xbf16>
    %q = form.quantize %r {words = 1 : i64} : (tensor<1x256xbf16>) -> tensor<1x256xi8>
    form.return %r : tensor<1x256xbf16>
  }
}

// CHECK: no lane kernel for: form.quantize x1, form.rope x1
