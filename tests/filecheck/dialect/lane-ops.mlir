// The lane dialect printed and parsed back: a step of buffers, a view and launches.
// RUN: lanec opt %s | filecheck %s
// RUN: lanec opt %s | lanec opt | filecheck %s

builtin.module {
  lane.step batch 1 tokens 1 {
    %x = lane.buffer {name = "input.tokens", role = "input", source = "tokens"} : memref<1xi32>
    %t = lane.buffer {name = "embed", role = "weight", sources = ["embed"], transforms = []} : memref<64x256xbf16>
    %c = lane.buffer {name = "conv", role = "weight", sources = ["q", "k", "v"], transforms = [{kind = "stack", axis = 0 : i64}, {kind = "transpose", axes = array<i64: 0, 2, 1>}]} : memref<3x4x128xbf16>
    %h = lane.buffer {name = "h", role = "activation"} : memref<1x512xbf16>
    %s = lane.buffer {name = "state", role = "state", source = "layer.conv"} : memref<2x384x3xbf16>
    %v = lane.view %h {offset = 256 : i64, strides = array<i64: 512, 1>} : memref<1x512xbf16> -> memref<1x256xbf16>
    lane.launch "embed"(%x, %t, %v) {spec = {rows = 1 : i64, vocab = 64 : i64, width = 256 : i64}, grid = array<i64: 1, 1, 1>, block = array<i64: 256, 1, 1>, cluster = array<i64: 1, 1, 1>, shared_bytes = 0 : i64, pdl = true} : memref<1xi32>, memref<64x256xbf16>, memref<1x256xbf16>
    lane.return %h : memref<1x512xbf16>
  }
}

// CHECK:      lane.step batch 1 tokens 1 {
// CHECK-NEXT:   %x = lane.buffer {name = "input.tokens", role = "input", source = "tokens"} : memref<1xi32>
// CHECK-NEXT:   %t = lane.buffer {name = "embed", role = "weight", sources = ["embed"], transforms = []} : memref<64x256xbf16>
// CHECK-NEXT:   %c = lane.buffer {name = "conv", role = "weight", sources = ["q", "k", "v"], transforms = [{kind = "stack", axis = 0 : i64}, {kind = "transpose", axes = array<i64: 0, 2, 1>}]} : memref<3x4x128xbf16>
// CHECK-NEXT:   %h = lane.buffer {name = "h", role = "activation"} : memref<1x512xbf16>
// CHECK-NEXT:   %s = lane.buffer {name = "state", role = "state", source = "layer.conv"} : memref<2x384x3xbf16>
// CHECK-NEXT:   %v = lane.view %h {offset = 256 : i64, strides = array<i64: 512, 1>} : memref<1x512xbf16> -> memref<1x256xbf16>
// CHECK-NEXT:   lane.launch "embed"(%x, %t, %v) {spec = {rows = 1 : i64, vocab = 64 : i64, width = 256 : i64}, grid = array<i64: 1, 1, 1>, block = array<i64: 256, 1, 1>, cluster = array<i64: 1, 1, 1>, shared_bytes = 0 : i64, pdl = true} : memref<1xi32>, memref<64x256xbf16>, memref<1x256xbf16>
// CHECK-NEXT:   lane.return %h : memref<1x512xbf16>
// CHECK-NEXT: }
