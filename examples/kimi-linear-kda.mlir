builtin.module {
  form.step batch 1 tokens 1 {
    %0 = form.input {role = "tokens"} : tensor<1xi32>
    %1 = form.input {role = "slots"} : tensor<1xi32>
    %2 = form.weight {name = "model.embed_tokens.weight", format = "bf16"} : tensor<163840x2304xbf16>
    %3 = form.weight {name = "model.layers.0.input_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %4 = form.weight {name = "model.layers.0.self_attn.q_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %5 = form.weight {name = "model.layers.0.self_attn.k_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %6 = form.weight {name = "model.layers.0.self_attn.v_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %7 = form.weight {name = "model.layers.0.self_attn.f_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %8 = form.weight {name = "model.layers.0.self_attn.b_proj.weight", format = "bf16"} : tensor<32x2304xbf16>
    %9 = form.weight {name = "model.layers.0.self_attn.g_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %10 = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<2x12288x3xbf16>
    %11 = form.weight {name = "model.layers.0.self_attn.q_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %12 = form.weight {name = "model.layers.0.self_attn.k_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %13 = form.weight {name = "model.layers.0.self_attn.v_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %14 = form.weight {name = "model.layers.0.self_attn.f_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %15 = form.weight {name = "model.layers.0.self_attn.A_log", format = "bf16"} : tensor<32xf32>
    %16 = form.weight {name = "model.layers.0.self_attn.dt_bias", format = "bf16"} : tensor<4096xf32>
    %17 = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<2x32x128x128xf32>
    %18 = form.weight {name = "model.layers.0.self_attn.g_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %19 = form.weight {name = "model.layers.0.self_attn.o_norm.weight", format = "bf16"} : tensor<128xbf16>
    %20 = form.weight {name = "model.layers.0.self_attn.o_proj.weight", format = "bf16"} : tensor<2304x4096xbf16>
    %21 = form.weight {name = "model.layers.0.post_attention_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %22 = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %23 = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %24 = form.weight {name = "model.layers.0.mlp.down_proj.weight", format = "bf16"} : tensor<2304x9216xbf16>
    %25 = form.weight {name = "model.layers.1.input_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %26 = form.weight {name = "model.layers.1.self_attn.q_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %27 = form.weight {name = "model.layers.1.self_attn.k_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %28 = form.weight {name = "model.layers.1.self_attn.v_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %29 = form.weight {name = "model.layers.1.self_attn.f_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %30 = form.weight {name = "model.layers.1.self_attn.b_proj.weight", format = "bf16"} : tensor<32x2304xbf16>
    %31 = form.weight {name = "model.layers.1.self_attn.g_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %32 = form.state {name = "model.layers.1.conv", kind = "conv"} : tensor<2x12288x3xbf16>
    %33 = form.weight {name = "model.layers.1.self_attn.q_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %34 = form.weight {name = "model.layers.1.self_attn.k_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %35 = form.weight {name = "model.layers.1.self_attn.v_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %36 = form.weight {name = "model.layers.1.self_attn.f_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %37 = form.weight {name = "model.layers.1.self_attn.A_log", format = "bf16"} : tensor<32xf32>
    %38 = form.weight {name = "model.layers.1.self_attn.dt_bias", format = "bf16"} : tensor<4096xf32>
    %39 = form.state {name = "model.layers.1.recurrent", kind = "recurrent"} : tensor<2x32x128x128xf32>
    %40 = form.weight {name = "model.layers.1.self_attn.g_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %41 = form.weight {name = "model.layers.1.self_attn.o_norm.weight", format = "bf16"} : tensor<128xbf16>
    %42 = form.weight {name = "model.layers.1.self_attn.o_proj.weight", format = "bf16"} : tensor<2304x4096xbf16>
    %43 = form.weight {name = "model.layers.1.post_attention_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %44 = form.weight {name = "model.layers.1.mlp.gate_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %45 = form.weight {name = "model.layers.1.mlp.up_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %46 = form.weight {name = "model.layers.1.mlp.down_proj.weight", format = "bf16"} : tensor<2304x9216xbf16>
    %47 = form.weight {name = "model.layers.2.input_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %48 = form.weight {name = "model.layers.2.self_attn.q_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %49 = form.weight {name = "model.layers.2.self_attn.k_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %50 = form.weight {name = "model.layers.2.self_attn.v_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %51 = form.weight {name = "model.layers.2.self_attn.f_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %52 = form.weight {name = "model.layers.2.self_attn.b_proj.weight", format = "bf16"} : tensor<32x2304xbf16>
    %53 = form.weight {name = "model.layers.2.self_attn.g_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %54 = form.state {name = "model.layers.2.conv", kind = "conv"} : tensor<2x12288x3xbf16>
    %55 = form.weight {name = "model.layers.2.self_attn.q_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %56 = form.weight {name = "model.layers.2.self_attn.k_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %57 = form.weight {name = "model.layers.2.self_attn.v_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %58 = form.weight {name = "model.layers.2.self_attn.f_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %59 = form.weight {name = "model.layers.2.self_attn.A_log", format = "bf16"} : tensor<32xf32>
    %60 = form.weight {name = "model.layers.2.self_attn.dt_bias", format = "bf16"} : tensor<4096xf32>
    %61 = form.state {name = "model.layers.2.recurrent", kind = "recurrent"} : tensor<2x32x128x128xf32>
    %62 = form.weight {name = "model.layers.2.self_attn.g_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %63 = form.weight {name = "model.layers.2.self_attn.o_norm.weight", format = "bf16"} : tensor<128xbf16>
    %64 = form.weight {name = "model.layers.2.self_attn.o_proj.weight", format = "bf16"} : tensor<2304x4096xbf16>
    %65 = form.weight {name = "model.layers.2.post_attention_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %66 = form.weight {name = "model.layers.2.mlp.gate_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %67 = form.weight {name = "model.layers.2.mlp.up_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %68 = form.weight {name = "model.layers.2.mlp.down_proj.weight", format = "bf16"} : tensor<2304x9216xbf16>
    %69 = form.weight {name = "model.norm.weight", format = "bf16"} : tensor<2304xbf16>
    %70 = form.weight {name = "lm_head.weight", format = "bf16"} : tensor<163840x2304xbf16>
    %71 = form.embed %0, %2 : (tensor<1xi32>, tensor<163840x2304xbf16>) -> tensor<1x2304xbf16>
    %72 = form.norm %71, %3 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %73 = form.product %72, %4 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %74 = form.product %72, %5 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %75 = form.product %72, %6 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %76 = form.product %72, %7 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %77 = form.product %72, %8 : (tensor<1x2304xbf16>, tensor<32x2304xbf16>) -> tensor<1x32xbf16>
    %78 = form.product %72, %9 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %79 = form.conv %73, %10, %11, %1 {offset = 0 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %80 = form.conv %74, %10, %12, %1 {offset = 4096 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %81 = form.conv %75, %10, %13, %1 {offset = 8192 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %82 = form.l2norm %79 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %83 = form.l2norm %80 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %84 = form.product %76, %14 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %85 = form.kda_gate %84, %15, %16 {heads = 32 : i64, form = "softplus"} : (tensor<1x4096xbf16>, tensor<32xf32>, tensor<4096xf32>) -> tensor<1x4096xf32>
    %86 = form.sigmoid %77 : (tensor<1x32xbf16>) -> tensor<1x32xbf16>
    %87 = form.delta_rule %82, %83, %81, %85, %86, %17, %1 {heads = 32 : i64, key_heads = 32 : i64, scale = 0.088388347648318447 : f64} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xf32>, tensor<1x32xbf16>, tensor<2x32x128x128xf32>, tensor<1xi32>) -> tensor<1x4096xbf16>
    %88 = form.product %78, %18 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %89 = form.norm_gated %87, %88, %19 {heads = 32 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<128xbf16>) -> tensor<1x4096xbf16>
    %90 = form.product %89, %20 : (tensor<1x4096xbf16>, tensor<2304x4096xbf16>) -> tensor<1x2304xbf16>
    %91 = form.add %71, %90 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %92 = form.norm %91, %21 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %93 = form.product %92, %22 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %94 = form.product %92, %23 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %95 = form.swiglu %93, %94 : (tensor<1x9216xbf16>, tensor<1x9216xbf16>) -> tensor<1x9216xbf16>
    %96 = form.product %95, %24 : (tensor<1x9216xbf16>, tensor<2304x9216xbf16>) -> tensor<1x2304xbf16>
    %97 = form.add %91, %96 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %98 = form.norm %97, %25 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %99 = form.product %98, %26 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %100 = form.product %98, %27 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %101 = form.product %98, %28 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %102 = form.product %98, %29 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %103 = form.product %98, %30 : (tensor<1x2304xbf16>, tensor<32x2304xbf16>) -> tensor<1x32xbf16>
    %104 = form.product %98, %31 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %105 = form.conv %99, %32, %33, %1 {offset = 0 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %106 = form.conv %100, %32, %34, %1 {offset = 4096 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %107 = form.conv %101, %32, %35, %1 {offset = 8192 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %108 = form.l2norm %105 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %109 = form.l2norm %106 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %110 = form.product %102, %36 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %111 = form.kda_gate %110, %37, %38 {heads = 32 : i64, form = "softplus"} : (tensor<1x4096xbf16>, tensor<32xf32>, tensor<4096xf32>) -> tensor<1x4096xf32>
    %112 = form.sigmoid %103 : (tensor<1x32xbf16>) -> tensor<1x32xbf16>
    %113 = form.delta_rule %108, %109, %107, %111, %112, %39, %1 {heads = 32 : i64, key_heads = 32 : i64, scale = 0.088388347648318447 : f64} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xf32>, tensor<1x32xbf16>, tensor<2x32x128x128xf32>, tensor<1xi32>) -> tensor<1x4096xbf16>
    %114 = form.product %104, %40 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %115 = form.norm_gated %113, %114, %41 {heads = 32 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<128xbf16>) -> tensor<1x4096xbf16>
    %116 = form.product %115, %42 : (tensor<1x4096xbf16>, tensor<2304x4096xbf16>) -> tensor<1x2304xbf16>
    %117 = form.add %97, %116 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %118 = form.norm %117, %43 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %119 = form.product %118, %44 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %120 = form.product %118, %45 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %121 = form.swiglu %119, %120 : (tensor<1x9216xbf16>, tensor<1x9216xbf16>) -> tensor<1x9216xbf16>
    %122 = form.product %121, %46 : (tensor<1x9216xbf16>, tensor<2304x9216xbf16>) -> tensor<1x2304xbf16>
    %123 = form.add %117, %122 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %124 = form.norm %123, %47 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %125 = form.product %124, %48 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %126 = form.product %124, %49 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %127 = form.product %124, %50 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %128 = form.product %124, %51 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %129 = form.product %124, %52 : (tensor<1x2304xbf16>, tensor<32x2304xbf16>) -> tensor<1x32xbf16>
    %130 = form.product %124, %53 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %131 = form.conv %125, %54, %55, %1 {offset = 0 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %132 = form.conv %126, %54, %56, %1 {offset = 4096 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %133 = form.conv %127, %54, %57, %1 {offset = 8192 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %134 = form.l2norm %131 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %135 = form.l2norm %132 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %136 = form.product %128, %58 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %137 = form.kda_gate %136, %59, %60 {heads = 32 : i64, form = "softplus"} : (tensor<1x4096xbf16>, tensor<32xf32>, tensor<4096xf32>) -> tensor<1x4096xf32>
    %138 = form.sigmoid %129 : (tensor<1x32xbf16>) -> tensor<1x32xbf16>
    %139 = form.delta_rule %134, %135, %133, %137, %138, %61, %1 {heads = 32 : i64, key_heads = 32 : i64, scale = 0.088388347648318447 : f64} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xf32>, tensor<1x32xbf16>, tensor<2x32x128x128xf32>, tensor<1xi32>) -> tensor<1x4096xbf16>
    %140 = form.product %130, %62 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %141 = form.norm_gated %139, %140, %63 {heads = 32 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<128xbf16>) -> tensor<1x4096xbf16>
    %142 = form.product %141, %64 : (tensor<1x4096xbf16>, tensor<2304x4096xbf16>) -> tensor<1x2304xbf16>
    %143 = form.add %123, %142 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %144 = form.norm %143, %65 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %145 = form.product %144, %66 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %146 = form.product %144, %67 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %147 = form.swiglu %145, %146 : (tensor<1x9216xbf16>, tensor<1x9216xbf16>) -> tensor<1x9216xbf16>
    %148 = form.product %147, %68 : (tensor<1x9216xbf16>, tensor<2304x9216xbf16>) -> tensor<1x2304xbf16>
    %149 = form.add %143, %148 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %150 = form.norm %149, %69 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %151 = form.product %150, %70 : (tensor<1x2304xbf16>, tensor<163840x2304xbf16>) -> tensor<1x163840xbf16>
    %152 = form.argmax %151 : (tensor<1x163840xbf16>) -> tensor<1xi32>
    form.return %152, %151 : tensor<1xi32>, tensor<1x163840xbf16>
  }
}
