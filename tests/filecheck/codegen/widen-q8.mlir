// RUN: lanec opt %s -p lower-to-lane 2>&1 | filecheck %s

// A product by q8_0 checkpoint rows under precise numerics reads its activation bf16, which
// q8_gemv (an int8 activation by q8_0 blocks) does not: its rows are widened to bf16 once at load,
// the blocks' values (the `q8_0_values` transform: never a silent bf16 read of the source), and the
// bf16 gemv runs. A quantize-free step; `lanec explain` lists each widening.
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

// CHECK: lane.buffer {name = "w", role = "weight", sources = ["w"], transforms = [{kind = "q8_0_values"}]} : memref<64x256xbf16>
// CHECK: lane.launch "gemv"(%{{.*}}, %{{.*}}, %{{.*}}) {spec = {rows = 1 : i64, width = 256 : i64, parts = array<i64: 64>}
// CHECK-NOT: quantize
