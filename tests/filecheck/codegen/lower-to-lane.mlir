// RUN: lanec opt %s -p pair-gate-up,fold-residual,lower-to-lane | filecheck %s
// RUN: lanec opt %s -p pair-gate-up,fold-residual,lower-to-lane -t cute-dsl | filecheck %s --check-prefix=PY
// RUN: lanec opt %s -p lower-to-lane | filecheck %s --check-prefix=PLAIN

// A decode step of two rows: embed, a gated pair, a down product, the residual, a norm, argmax.
builtin.module {
  form.step batch 2 tokens 1 {
    %tokens = form.input {role = "tokens"} : tensor<2xi32>
    %table = form.weight {name = "embed", format = "bf16"} : tensor<64x256xbf16>
    %gw = form.weight {name = "gate", format = "bf16"} : tensor<512x256xbf16>
    %uw = form.weight {name = "up", format = "bf16"} : tensor<512x256xbf16>
    %dw = form.weight {name = "down", format = "bf16"} : tensor<256x512xbf16>
    %nw = form.weight {name = "norm", format = "bf16"} : tensor<256xbf16>
    %h = form.embed %tokens, %table : (tensor<2xi32>, tensor<64x256xbf16>) -> tensor<2x256xbf16>
    %g = form.product %h, %gw : (tensor<2x256xbf16>, tensor<512x256xbf16>) -> tensor<2x512xbf16>
    %u = form.product %h, %uw : (tensor<2x256xbf16>, tensor<512x256xbf16>) -> tensor<2x512xbf16>
    %s = form.swiglu %g, %u : (tensor<2x512xbf16>, tensor<2x512xbf16>) -> tensor<2x512xbf16>
    %d = form.product %s, %dw : (tensor<2x512xbf16>, tensor<256x512xbf16>) -> tensor<2x256xbf16>
    %r = form.add %h, %d : (tensor<2x256xbf16>, tensor<2x256xbf16>) -> tensor<2x256xbf16>
    %n = form.norm %r, %nw {eps = 1.000000e-05 : f64} : (tensor<2x256xbf16>, tensor<256xbf16>) -> tensor<2x256xbf16>
    %t = form.argmax %n : (tensor<2x256xbf16>) -> tensor<2xi32>
    form.return %t : tensor<2xi32>
  }
}

// CHECK:      lane.step batch 2 tokens 1 {
// CHECK:        %[[TOK:.*]] = lane.buffer {name = "input.tokens", role = "input", source = "tokens"} : memref<2xi32>
// Each launch followed by one that streams before its PDL wait (a product) releases its dependents at its entry
// (release_point): the embed and the gated pair; the down product, followed by a norm, after its wait.
// CHECK:        lane.launch "embed"(%[[TOK]], %{{.*}}, %[[H:.*]]) {spec = {rows = 2 : i64, vocab = 64 : i64, width = 256 : i64, release = "entry"}
// CHECK-SAME:     pdl = true
// CHECK:        lane.launch "gated_gemv"(%[[H]], %{{.*}}, %{{.*}}, %[[S:.*]]) {spec = {rows = 2 : i64, width = 256 : i64, hidden = 512 : i64, release = "entry"}
// CHECK:        lane.launch "gemv"(%[[S]], %{{.*}}, %[[D:.*]]) {spec = {rows = 2 : i64, width = 512 : i64, parts = array<i64: 256>}, grid
// CHECK:        lane.launch "rmsnorm"(%[[H]], %[[D]], %{{.*}}, %[[N:[0-9]+]], %{{.*}}) {spec = {rows = 2 : i64, width = 256 : i64, eps = 1.000000e-05 : f64, residual = true}
// CHECK:        %[[OUT:.*]] = lane.buffer {name = "argmax", role = "output", source = "0"} : memref<2xi32>
// CHECK:        lane.launch "argmax"(%[[N]], %[[OUT]])
// CHECK:        lane.return %[[OUT]] : memref<2xi32>

// PY:      from lanec.codegen.kernels.embed import Embed
// PY:      from lanec.codegen.kernels.base import released
// PY:      LAUNCHES = [
// PY:        released(Embed(rows=2, vocab=64, width=256), 'entry'),
// PY:        released(GatedGemv(rows=2, width=256, hidden=512), 'entry'),
// PY:        Gemv(rows=2, width=512, parts=(256,)),
// PY:        RmsNorm(rows=2, width=256, eps=1e-05, residual=True),
// PY:        Argmax(rows=2, vocab=256),
// PY:      ]

// Without the rules, gate and up are two GEMVs and the SwiGLU and the residual add their own launches.
// PLAIN-COUNT-2: lane.launch "gemv"(%{{.*}}) {spec = {rows = 2 : i64, width = 256 : i64
// PLAIN:         lane.launch "elementwise"(%{{.*}}) {spec = {op = "swiglu"
// PLAIN:         lane.launch "gemv"
// PLAIN:         lane.launch "elementwise"(%{{.*}}) {spec = {op = "add"
// PLAIN:         lane.launch "rmsnorm"
