builtin.module attributes {lane.shim = {numerics = "quantized", words = 1 : i64, fuse_quant = true, batch_products = false}} {
  form.step batch 1 tokens 1 {
    %0 = form.input {role = "tokens"} : tensor<1xi32>
    %1 = form.input {role = "positions"} : tensor<1xi32>
    %2 = form.input {role = "pages"} : tensor<1x128xi32>
    %3 = form.weight {name = "model.embed_tokens.weight", format = "bf16"} : tensor<32000x2048xbf16>
    %4 = form.weight {name = "model.layers.0.input_layernorm.weight", format = "bf16"} : tensor<2048xbf16>
    %5 = form.weight {name = "model.layers.0.self_attn.q_proj.weight", format = "q8_0"} : tensor<2048x2048xbf16>
    %6 = form.weight {name = "model.layers.0.self_attn.k_proj.weight", format = "q8_0"} : tensor<512x2048xbf16>
    %7 = form.weight {name = "model.layers.0.self_attn.v_proj.weight", format = "q8_0"} : tensor<512x2048xbf16>
    %8 = form.state {name = "model.layers.0.key_cache", kind = "kv"} : tensor<128x16x4x128xbf16>
    %9 = form.state {name = "model.layers.0.value_cache", kind = "kv"} : tensor<128x16x4x128xbf16>
    %10 = form.weight {name = "model.layers.0.self_attn.o_proj.weight", format = "q8_0"} : tensor<2048x2048xbf16>
    %11 = form.weight {name = "model.layers.0.post_attention_layernorm.weight", format = "bf16"} : tensor<2048xbf16>
    %12 = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "q8_0"} : tensor<8192x2048xbf16>
    %13 = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "q8_0"} : tensor<8192x2048xbf16>
    %14 = form.weight {name = "model.layers.0.mlp.down_proj.weight", format = "q8_0"} : tensor<2048x8192xbf16>
    %15 = form.weight {name = "model.layers.1.input_layernorm.weight", format = "bf16"} : tensor<2048xbf16>
    %16 = form.weight {name = "model.layers.1.self_attn.q_proj.weight", format = "q8_0"} : tensor<2048x2048xbf16>
    %17 = form.weight {name = "model.layers.1.self_attn.k_proj.weight", format = "q8_0"} : tensor<512x2048xbf16>
    %18 = form.weight {name = "model.layers.1.self_attn.v_proj.weight", format = "q8_0"} : tensor<512x2048xbf16>
    %19 = form.state {name = "model.layers.1.key_cache", kind = "kv"} : tensor<128x16x4x128xbf16>
    %20 = form.state {name = "model.layers.1.value_cache", kind = "kv"} : tensor<128x16x4x128xbf16>
    %21 = form.weight {name = "model.layers.1.self_attn.o_proj.weight", format = "q8_0"} : tensor<2048x2048xbf16>
    %22 = form.weight {name = "model.layers.1.post_attention_layernorm.weight", format = "bf16"} : tensor<2048xbf16>
    %23 = form.weight {name = "model.layers.1.mlp.gate_proj.weight", format = "q8_0"} : tensor<8192x2048xbf16>
    %24 = form.weight {name = "model.layers.1.mlp.up_proj.weight", format = "q8_0"} : tensor<8192x2048xbf16>
    %25 = form.weight {name = "model.layers.1.mlp.down_proj.weight", format = "q8_0"} : tensor<2048x8192xbf16>
    %26 = form.weight {name = "model.norm.weight", format = "bf16"} : tensor<2048xbf16>
    %27 = form.weight {name = "lm_head.weight", format = "q8_0"} : tensor<32000x2048xbf16>
    %28 = form.embed %0, %3 : (tensor<1xi32>, tensor<32000x2048xbf16>) -> tensor<1x2048xbf16>
    %29 = form.norm %28, %4 {eps = 1.000000e-05 : f64} : (tensor<1x2048xbf16>, tensor<2048xbf16>) -> tensor<1x2048xbf16>
    %30 = form.product %29, %5 : (tensor<1x2048xbf16>, tensor<2048x2048xbf16>) -> tensor<1x2048xbf16>
    %31 = form.product %29, %6 : (tensor<1x2048xbf16>, tensor<512x2048xbf16>) -> tensor<1x512xbf16>
    %32 = form.product %29, %7 : (tensor<1x2048xbf16>, tensor<512x2048xbf16>) -> tensor<1x512xbf16>
    %33 = form.rope %30, %1 {heads = 16 : i64, rotary = 128 : i64, theta = 5.000000e+05 : f64} : (tensor<1x2048xbf16>, tensor<1xi32>) -> tensor<1x2048xbf16>
    %34 = form.rope %31, %1 {heads = 4 : i64, rotary = 128 : i64, theta = 5.000000e+05 : f64} : (tensor<1x512xbf16>, tensor<1xi32>) -> tensor<1x512xbf16>
    %35 = form.attention %33, %34, %32, %8, %9, %2, %1 {heads = 16 : i64, kv_heads = 4 : i64, scale = 0.088388347648318447 : f64} : (tensor<1x2048xbf16>, tensor<1x512xbf16>, tensor<1x512xbf16>, tensor<128x16x4x128xbf16>, tensor<128x16x4x128xbf16>, tensor<1x128xi32>, tensor<1xi32>) -> tensor<1x2048xbf16>
    %36 = form.product %35, %10 : (tensor<1x2048xbf16>, tensor<2048x2048xbf16>) -> tensor<1x2048xbf16>
    %37 = form.add %28, %36 : (tensor<1x2048xbf16>, tensor<1x2048xbf16>) -> tensor<1x2048xbf16>
    %38 = form.norm %37, %11 {eps = 1.000000e-05 : f64} : (tensor<1x2048xbf16>, tensor<2048xbf16>) -> tensor<1x2048xbf16>
    %39 = form.product %38, %12 : (tensor<1x2048xbf16>, tensor<8192x2048xbf16>) -> tensor<1x8192xbf16>
    %40 = form.product %38, %13 : (tensor<1x2048xbf16>, tensor<8192x2048xbf16>) -> tensor<1x8192xbf16>
    %41 = form.swiglu %39, %40 : (tensor<1x8192xbf16>, tensor<1x8192xbf16>) -> tensor<1x8192xbf16>
    %42 = form.product %41, %14 : (tensor<1x8192xbf16>, tensor<2048x8192xbf16>) -> tensor<1x2048xbf16>
    %43 = form.add %37, %42 : (tensor<1x2048xbf16>, tensor<1x2048xbf16>) -> tensor<1x2048xbf16>
    %44 = form.norm %43, %15 {eps = 1.000000e-05 : f64} : (tensor<1x2048xbf16>, tensor<2048xbf16>) -> tensor<1x2048xbf16>
    %45 = form.product %44, %16 : (tensor<1x2048xbf16>, tensor<2048x2048xbf16>) -> tensor<1x2048xbf16>
    %46 = form.product %44, %17 : (tensor<1x2048xbf16>, tensor<512x2048xbf16>) -> tensor<1x512xbf16>
    %47 = form.product %44, %18 : (tensor<1x2048xbf16>, tensor<512x2048xbf16>) -> tensor<1x512xbf16>
    %48 = form.rope %45, %1 {heads = 16 : i64, rotary = 128 : i64, theta = 5.000000e+05 : f64} : (tensor<1x2048xbf16>, tensor<1xi32>) -> tensor<1x2048xbf16>
    %49 = form.rope %46, %1 {heads = 4 : i64, rotary = 128 : i64, theta = 5.000000e+05 : f64} : (tensor<1x512xbf16>, tensor<1xi32>) -> tensor<1x512xbf16>
    %50 = form.attention %48, %49, %47, %19, %20, %2, %1 {heads = 16 : i64, kv_heads = 4 : i64, scale = 0.088388347648318447 : f64} : (tensor<1x2048xbf16>, tensor<1x512xbf16>, tensor<1x512xbf16>, tensor<128x16x4x128xbf16>, tensor<128x16x4x128xbf16>, tensor<1x128xi32>, tensor<1xi32>) -> tensor<1x2048xbf16>
    %51 = form.product %50, %21 : (tensor<1x2048xbf16>, tensor<2048x2048xbf16>) -> tensor<1x2048xbf16>
    %52 = form.add %43, %51 : (tensor<1x2048xbf16>, tensor<1x2048xbf16>) -> tensor<1x2048xbf16>
    %53 = form.norm %52, %22 {eps = 1.000000e-05 : f64} : (tensor<1x2048xbf16>, tensor<2048xbf16>) -> tensor<1x2048xbf16>
    %54 = form.product %53, %23 : (tensor<1x2048xbf16>, tensor<8192x2048xbf16>) -> tensor<1x8192xbf16>
    %55 = form.product %53, %24 : (tensor<1x2048xbf16>, tensor<8192x2048xbf16>) -> tensor<1x8192xbf16>
    %56 = form.swiglu %54, %55 : (tensor<1x8192xbf16>, tensor<1x8192xbf16>) -> tensor<1x8192xbf16>
    %57 = form.product %56, %25 : (tensor<1x8192xbf16>, tensor<2048x8192xbf16>) -> tensor<1x2048xbf16>
    %58 = form.add %52, %57 : (tensor<1x2048xbf16>, tensor<1x2048xbf16>) -> tensor<1x2048xbf16>
    %59 = form.norm %58, %26 {eps = 1.000000e-05 : f64} : (tensor<1x2048xbf16>, tensor<2048xbf16>) -> tensor<1x2048xbf16>
    %60 = form.product %59, %27 : (tensor<1x2048xbf16>, tensor<32000x2048xbf16>) -> tensor<1x32000xbf16>
    %61 = form.argmax %60 : (tensor<1x32000xbf16>) -> tensor<1xi32>
    form.return %61, %60 : tensor<1xi32>, tensor<1x32000xbf16>
  }
}
