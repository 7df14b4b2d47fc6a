// RUN: not lanec opt %s --split-input-file -p hold-per-head-part,hold-values-in-place,lower-to-lane 2>&1 | filecheck %s
// (not: the second case is a one-line error, so the whole run exits 1; the first is checked in full)

// A latent attention the held-back rules keep absorbed (each head's nope part [0, 32) of its 64
// query values is whole 32-value blocks; the values at 0 of the 288-wide cache row, an even pitch):
// its launches are the absorption (a per-head gemv by kv_b's key half, transposed at load), the
// attention over the latent cache row, and the expansion (a per-head gemv by kv_b's value half).
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x128xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x256xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x288xbf16>
    %kvb = form.weight {name = "kv_b", format = "bf16"} : tensor<128x256xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x128xbf16>) -> tensor<1x128xbf16>
    %lat = form.embed %t, %el : (tensor<1xi32>, tensor<32x256xbf16>) -> tensor<1x256xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 32 : i64, rope = 32 : i64, lora = 256 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x128xbf16>, tensor<1x256xbf16>, tensor<1x32xbf16>, tensor<4x64x288xbf16>, tensor<128x256xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o : tensor<1x64xbf16>
  }
}

// CHECK:      lane.buffer {name = "kv_b", role = "weight", sources = ["kv_b"], transforms = [{kind = "reshape", shape = array<i64: 2, 64, 256>}, {kind = "slice", axis = 1 : i64, start = 0 : i64, stop = 32 : i64}, {kind = "transpose", axes = array<i64: 0, 2, 1>}, {kind = "reshape", shape = array<i64: 512, 32>}]} : memref<512x32xbf16>
// CHECK-NEXT: lane.buffer {name = "kv_b.2", role = "weight", sources = ["kv_b"], transforms = [{kind = "reshape", shape = array<i64: 2, 64, 256>}, {kind = "slice", axis = 1 : i64, start = 32 : i64, stop = 64 : i64}, {kind = "reshape", shape = array<i64: 64, 256>}]} : memref<64x256xbf16>
// the absorption and the attention release their dependents at their entry: each next launch streams early
// CHECK:      lane.launch "gemv"({{.*}}) {spec = {rows = 1 : i64, width = 32 : i64, parts = array<i64: 512>, per_head = array<i64: 2, 64, 0>, release = "entry"}
// CHECK:      lane.launch "latent_attention"({{.*}}) {spec = {batch = 1 : i64, tokens = 1 : i64, heads = 2 : i64, lora = 256 : i64, rope = 32 : i64, page_size = 64 : i64, max_pages = 4 : i64, cache_pages = 4 : i64, splits = 1 : i64, nope = 32 : i64, scale = 1.250000e-01 : f64, release = "entry"}
// CHECK-NOT:  attention_combine
// CHECK:      lane.launch "gemv"({{.*}}) {spec = {rows = 1 : i64, width = 256 : i64, parts = array<i64: 64>, per_head = array<i64: 2, 256, 0>}

// -----

// Held back (a nope part of 48: head 1's part straddles two 32-value blocks): run expanded.
// latent_expand writes the step's latent row and expands every cached latent into per-head keys
// (48 + 32 values, zeros to 96) and values (64) by kv_b transposed per head once at load; then
// expanded_attention attends a head a CTA over them.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x160xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x256xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x288xbf16>
    %kvb = form.weight {name = "kv_b", format = "bf16"} : tensor<224x256xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x160xbf16>) -> tensor<1x160xbf16>
    %lat = form.embed %t, %el : (tensor<1xi32>, tensor<32x256xbf16>) -> tensor<1x256xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 48 : i64, rope = 32 : i64, lora = 256 : i64, v = 64 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x160xbf16>, tensor<1x256xbf16>, tensor<1x32xbf16>, tensor<4x64x288xbf16>, tensor<224x256xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x128xbf16>
    form.return %o : tensor<1x128xbf16>
  }
}

// CHECK:      lane.buffer {name = "kv_b", role = "weight", sources = ["kv_b"], transforms = [{kind = "reshape", shape = array<i64: 2, 112, 256>}, {kind = "transpose", axes = array<i64: 0, 2, 1>}, {kind = "reshape", shape = array<i64: 512, 112>}]} : memref<512x112xbf16>
// CHECK:      lane.buffer {name = "latent_attention.keys", role = "activation"} : memref<4x64x2x96xbf16>
// CHECK-NEXT: lane.buffer {name = "latent_attention.expanded_values", role = "activation"} : memref<4x64x2x64xbf16>
// CHECK:      lane.launch "latent_expand"({{.*}}) {spec = {batch = 1 : i64, tokens = 1 : i64, heads = 2 : i64, nope = 48 : i64, rope = 32 : i64, v = 64 : i64, page_size = 64 : i64, max_pages = 4 : i64, cache_pages = 4 : i64, lora = 256 : i64}
// CHECK:      lane.launch "expanded_attention"({{.*}}) {spec = {batch = 1 : i64, tokens = 1 : i64, heads = 2 : i64, nope = 48 : i64, rope = 32 : i64, v = 64 : i64, page_size = 64 : i64, max_pages = 4 : i64, cache_pages = 4 : i64, splits = 1 : i64, scale = 1.250000e-01 : f64}
// CHECK-NOT:  lane.launch

// -----

// Held back and expanded, but a head's values of 32 are not what the expanded attention's warps
// take: the lowering names the fact in one line and writes nothing.
builtin.module {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %pos = form.input {role = "positions"} : tensor<1xi32>
    %pages = form.input {role = "pages"} : tensor<1x4xi32>
    %eq = form.weight {name = "embed_q", format = "bf16"} : tensor<32x160xbf16>
    %el = form.weight {name = "embed_l", format = "bf16"} : tensor<32x256xbf16>
    %er = form.weight {name = "embed_r", format = "bf16"} : tensor<32x32xbf16>
    %cache = form.state {name = "latent", kind = "latent"} : tensor<4x64x288xbf16>
    %kvb = form.weight {name = "kv_b", format = "bf16"} : tensor<160x256xbf16>
    %qr = form.embed %t, %eq : (tensor<1xi32>, tensor<32x160xbf16>) -> tensor<1x160xbf16>
    %lat = form.embed %t, %el : (tensor<1xi32>, tensor<32x256xbf16>) -> tensor<1x256xbf16>
    %kr = form.embed %t, %er : (tensor<1xi32>, tensor<32x32xbf16>) -> tensor<1x32xbf16>
    %o = form.latent_attention %qr, %lat, %kr, %cache, %kvb, %pages, %pos {heads = 2 : i64, nope = 48 : i64, rope = 32 : i64, lora = 256 : i64, v = 32 : i64, scale = 0.125 : f64, path = "absorbed"} : (tensor<1x160xbf16>, tensor<1x256xbf16>, tensor<1x32xbf16>, tensor<4x64x288xbf16>, tensor<160x256xbf16>, tensor<1x4xi32>, tensor<1xi32>) -> tensor<1x64xbf16>
    form.return %o : tensor<1x64xbf16>
  }
}

// CHECK: value width 32: one of 64, 128, 256
