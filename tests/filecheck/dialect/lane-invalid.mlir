// The lane dialect's verifiers, each message checked.
// RUN: lanec opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: Operation does not verify: buffer role 'scratch': one of weight, state, activation, input, output
%b = lane.buffer {name = "b", role = "scratch"} : memref<4xbf16>

// -----

// CHECK: Operation does not verify: weight buffer 'w' needs its sources and transforms
%w = lane.buffer {name = "w", role = "weight"} : memref<4x4xbf16>

// -----

// CHECK: Operation does not verify: a transform's kind must be one of none, concatenate, stack, interleave, transpose, reshape, slice, quantize_q8_0
%w = lane.buffer {name = "w", role = "weight", sources = ["a"], transforms = [{kind = "shuffle"}]} : memref<4x4xbf16>

// -----

// CHECK: Operation does not verify: state buffer 's' needs its source
%s = lane.buffer {name = "s", role = "state"} : memref<2x4xf32>

// -----

// CHECK: Operation does not verify: view reaches element 17; its buffer holds 16
%h = lane.buffer {name = "h", role = "activation"} : memref<2x8xbf16>
%v = lane.view %h {offset = 8 : i64, strides = array<i64: 8, 1>} : memref<2x8xbf16> -> memref<2x2xbf16>

// -----

// CHECK: Operation does not verify: grid [3, 32, 1] is not whole clusters of [2, 1, 1]
%h = lane.buffer {name = "h", role = "activation"} : memref<8xbf16>
lane.launch "kda_split"(%h) {spec = {}, grid = array<i64: 3, 32, 1>, block = array<i64: 160, 1, 1>, cluster = array<i64: 2, 1, 1>, shared_bytes = 0 : i64, pdl = true} : memref<8xbf16>

// -----

// CHECK: Operation does not verify: a block of 2048 threads: at most 1024
%h = lane.buffer {name = "h", role = "activation"} : memref<8xbf16>
lane.launch "gemv"(%h) {spec = {}, grid = array<i64: 1, 1, 1>, block = array<i64: 2048, 1, 1>, cluster = array<i64: 1, 1, 1>, shared_bytes = 0 : i64, pdl = true} : memref<8xbf16>

// -----

// CHECK: Operation does not verify: a cluster of more than 16 CTAs cannot launch on sm_90
%h = lane.buffer {name = "h", role = "activation"} : memref<8xbf16>
lane.launch "gemv"(%h) {spec = {}, grid = array<i64: 32, 1, 1>, block = array<i64: 32, 1, 1>, cluster = array<i64: 32, 1, 1>, shared_bytes = 0 : i64, pdl = true} : memref<8xbf16>

// -----

// CHECK: Operation does not verify: 240000 bytes of shared memory: sm_90 has 227 KB a block
%h = lane.buffer {name = "h", role = "activation"} : memref<8xbf16>
lane.launch "gemv"(%h) {spec = {}, grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, cluster = array<i64: 1, 1, 1>, shared_bytes = 240000 : i64, pdl = true} : memref<8xbf16>
