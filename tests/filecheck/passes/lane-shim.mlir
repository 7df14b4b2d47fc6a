// RUN: not lanec opt %s -p fuse-quant 2>&1 | filecheck %s

// The knobs a module records are checked where a rule reads them: fuse_quant has no meaning under
// precise numerics, a one-line error.
builtin.module attributes {lane.shim = {numerics = "precise", fuse_quant = true}} {
  form.step batch 1 tokens 1 {
    %t = form.input {role = "tokens"} : tensor<1xi32>
    %e = form.weight {name = "embed", format = "bf16"} : tensor<32x64xbf16>
    %x = form.embed %t, %e : (tensor<1xi32>, tensor<32x64xbf16>) -> tensor<1x64xbf16>
    form.return %x : tensor<1x64xbf16>
  }
}

// CHECK: error: fuse_quant quantizes in producers' epilogues: it needs --numerics quantized
// CHECK-NOT: Traceback
