builtin.module {
  form.step batch 1 tokens 1 {
    %0 = form.input {role = "tokens"} : tensor<1xi32>
    %1 = form.weight {name = "model.embed_tokens.weight", format = "bf16"} : tensor<32000x2304xbf16>
    %2 = form.weight {name = "model.layers.0.post_attention_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %3 = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %4 = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %5 = form.weight {name = "model.layers.0.mlp.down_proj.weight", format = "bf16"} : tensor<2304x9216xbf16>
    %6 = form.weight {name = "model.layers.1.post_attention_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %7 = form.weight {name = "model.layers.1.mlp.gate_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %8 = form.weight {name = "model.layers.1.mlp.up_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %9 = form.weight {name = "model.layers.1.mlp.down_proj.weight", format = "bf16"} : tensor<2304x9216xbf16>
    %10 = form.weight {name = "model.norm.weight", format = "bf16"} : tensor<2304xbf16>
    %11 = form.weight {name = "lm_head.weight", format = "bf16"} : tensor<32000x2304xbf16>
    %12 = form.embed %0, %1 : (tensor<1xi32>, tensor<32000x2304xbf16>) -> tensor<1x2304xbf16>
    %13 = form.norm %12, %2 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %14 = form.product %13, %3 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %15 = form.product %13, %4 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %16 = form.swiglu %14, %15 : (tensor<1x9216xbf16>, tensor<1x9216xbf16>) -> tensor<1x9216xbf16>
    %17 = form.product %16, %5 : (tensor<1x9216xbf16>, tensor<2304x9216xbf16>) -> tensor<1x2304xbf16>
    %18 = form.add %12, %17 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %19 = form.norm %18, %6 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %20 = form.product %19, %7 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %21 = form.product %19, %8 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %22 = form.swiglu %20, %21 : (tensor<1x9216xbf16>, tensor<1x9216xbf16>) -> tensor<1x9216xbf16>
    %23 = form.product %22, %9 : (tensor<1x9216xbf16>, tensor<2304x9216xbf16>) -> tensor<1x2304xbf16>
    %24 = form.add %18, %23 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %25 = form.norm %24, %10 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %26 = form.product %25, %11 : (tensor<1x2304xbf16>, tensor<32000x2304xbf16>) -> tensor<1x32000xbf16>
    %27 = form.argmax %26 : (tensor<1x32000xbf16>) -> tensor<1xi32>
    form.return %27, %26 : tensor<1xi32>, tensor<1x32000xbf16>
  }
}
