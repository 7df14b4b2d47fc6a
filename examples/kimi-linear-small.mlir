builtin.module {
  form.step batch 1 tokens 1 {
    %0 = form.input {role = "tokens"} : tensor<1xi32>
    %1 = form.input {role = "positions"} : tensor<1xi32>
    %2 = form.input {role = "slots"} : tensor<1xi32>
    %3 = form.input {role = "pages"} : tensor<1x64xi32>
    %4 = form.weight {name = "model.embed_tokens.weight", format = "bf16"} : tensor<163840x2304xbf16>
    %5 = form.weight {name = "model.layers.0.input_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %6 = form.weight {name = "model.layers.0.self_attn.q_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %7 = form.weight {name = "model.layers.0.self_attn.k_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %8 = form.weight {name = "model.layers.0.self_attn.v_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %9 = form.weight {name = "model.layers.0.self_attn.f_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %10 = form.weight {name = "model.layers.0.self_attn.b_proj.weight", format = "bf16"} : tensor<32x2304xbf16>
    %11 = form.weight {name = "model.layers.0.self_attn.g_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %12 = form.state {name = "model.layers.0.conv", kind = "conv"} : tensor<2x12288x3xbf16>
    %13 = form.weight {name = "model.layers.0.self_attn.q_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %14 = form.weight {name = "model.layers.0.self_attn.k_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %15 = form.weight {name = "model.layers.0.self_attn.v_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %16 = form.weight {name = "model.layers.0.self_attn.f_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %17 = form.weight {name = "model.layers.0.self_attn.A_log", format = "bf16"} : tensor<32xf32>
    %18 = form.weight {name = "model.layers.0.self_attn.dt_bias", format = "bf16"} : tensor<4096xf32>
    %19 = form.state {name = "model.layers.0.recurrent", kind = "recurrent"} : tensor<2x32x128x128xf32>
    %20 = form.weight {name = "model.layers.0.self_attn.g_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %21 = form.weight {name = "model.layers.0.self_attn.o_norm.weight", format = "bf16"} : tensor<128xbf16>
    %22 = form.weight {name = "model.layers.0.self_attn.o_proj.weight", format = "bf16"} : tensor<2304x4096xbf16>
    %23 = form.weight {name = "model.layers.0.post_attention_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %24 = form.weight {name = "model.layers.0.mlp.gate_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %25 = form.weight {name = "model.layers.0.mlp.up_proj.weight", format = "bf16"} : tensor<9216x2304xbf16>
    %26 = form.weight {name = "model.layers.0.mlp.down_proj.weight", format = "bf16"} : tensor<2304x9216xbf16>
    %27 = form.weight {name = "model.layers.1.input_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %28 = form.weight {name = "model.layers.1.self_attn.q_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %29 = form.weight {name = "model.layers.1.self_attn.k_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %30 = form.weight {name = "model.layers.1.self_attn.v_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %31 = form.weight {name = "model.layers.1.self_attn.f_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %32 = form.weight {name = "model.layers.1.self_attn.b_proj.weight", format = "bf16"} : tensor<32x2304xbf16>
    %33 = form.weight {name = "model.layers.1.self_attn.g_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %34 = form.state {name = "model.layers.1.conv", kind = "conv"} : tensor<2x12288x3xbf16>
    %35 = form.weight {name = "model.layers.1.self_attn.q_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %36 = form.weight {name = "model.layers.1.self_attn.k_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %37 = form.weight {name = "model.layers.1.self_attn.v_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %38 = form.weight {name = "model.layers.1.self_attn.f_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %39 = form.weight {name = "model.layers.1.self_attn.A_log", format = "bf16"} : tensor<32xf32>
    %40 = form.weight {name = "model.layers.1.self_attn.dt_bias", format = "bf16"} : tensor<4096xf32>
    %41 = form.state {name = "model.layers.1.recurrent", kind = "recurrent"} : tensor<2x32x128x128xf32>
    %42 = form.weight {name = "model.layers.1.self_attn.g_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %43 = form.weight {name = "model.layers.1.self_attn.o_norm.weight", format = "bf16"} : tensor<128xbf16>
    %44 = form.weight {name = "model.layers.1.self_attn.o_proj.weight", format = "bf16"} : tensor<2304x4096xbf16>
    %45 = form.weight {name = "model.layers.1.post_attention_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %46 = form.weight {name = "model.layers.1.block_sparse_moe.gate.weight", format = "bf16"} : tensor<256x2304xbf16>
    %47 = form.weight {name = "model.layers.1.block_sparse_moe.gate.e_score_correction_bias", format = "bf16"} : tensor<256xf32>
    %48 = form.weight {name = "model.layers.1.block_sparse_moe.experts.*.w1.weight", format = "bf16"} : tensor<256x1024x2304xbf16>
    %49 = form.weight {name = "model.layers.1.block_sparse_moe.experts.*.w3.weight", format = "bf16"} : tensor<256x1024x2304xbf16>
    %50 = form.weight {name = "model.layers.1.block_sparse_moe.experts.*.w2.weight", format = "bf16"} : tensor<256x2304x1024xbf16>
    %51 = form.weight {name = "model.layers.1.block_sparse_moe.shared_experts.gate_proj.weight", format = "bf16"} : tensor<1024x2304xbf16>
    %52 = form.weight {name = "model.layers.1.block_sparse_moe.shared_experts.up_proj.weight", format = "bf16"} : tensor<1024x2304xbf16>
    %53 = form.weight {name = "model.layers.1.block_sparse_moe.shared_experts.down_proj.weight", format = "bf16"} : tensor<2304x1024xbf16>
    %54 = form.weight {name = "model.layers.2.input_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %55 = form.weight {name = "model.layers.2.self_attn.q_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %56 = form.weight {name = "model.layers.2.self_attn.k_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %57 = form.weight {name = "model.layers.2.self_attn.v_proj.weight", format = "bf16"} : tensor<4096x2304xbf16>
    %58 = form.weight {name = "model.layers.2.self_attn.f_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %59 = form.weight {name = "model.layers.2.self_attn.b_proj.weight", format = "bf16"} : tensor<32x2304xbf16>
    %60 = form.weight {name = "model.layers.2.self_attn.g_a_proj.weight", format = "bf16"} : tensor<128x2304xbf16>
    %61 = form.state {name = "model.layers.2.conv", kind = "conv"} : tensor<2x12288x3xbf16>
    %62 = form.weight {name = "model.layers.2.self_attn.q_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %63 = form.weight {name = "model.layers.2.self_attn.k_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %64 = form.weight {name = "model.layers.2.self_attn.v_conv1d.weight", format = "bf16"} : tensor<4096x4xbf16>
    %65 = form.weight {name = "model.layers.2.self_attn.f_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %66 = form.weight {name = "model.layers.2.self_attn.A_log", format = "bf16"} : tensor<32xf32>
    %67 = form.weight {name = "model.layers.2.self_attn.dt_bias", format = "bf16"} : tensor<4096xf32>
    %68 = form.state {name = "model.layers.2.recurrent", kind = "recurrent"} : tensor<2x32x128x128xf32>
    %69 = form.weight {name = "model.layers.2.self_attn.g_b_proj.weight", format = "bf16"} : tensor<4096x128xbf16>
    %70 = form.weight {name = "model.layers.2.self_attn.o_norm.weight", format = "bf16"} : tensor<128xbf16>
    %71 = form.weight {name = "model.layers.2.self_attn.o_proj.weight", format = "bf16"} : tensor<2304x4096xbf16>
    %72 = form.weight {name = "model.layers.2.post_attention_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %73 = form.weight {name = "model.layers.2.block_sparse_moe.gate.weight", format = "bf16"} : tensor<256x2304xbf16>
    %74 = form.weight {name = "model.layers.2.block_sparse_moe.gate.e_score_correction_bias", format = "bf16"} : tensor<256xf32>
    %75 = form.weight {name = "model.layers.2.block_sparse_moe.experts.*.w1.weight", format = "bf16"} : tensor<256x1024x2304xbf16>
    %76 = form.weight {name = "model.layers.2.block_sparse_moe.experts.*.w3.weight", format = "bf16"} : tensor<256x1024x2304xbf16>
    %77 = form.weight {name = "model.layers.2.block_sparse_moe.experts.*.w2.weight", format = "bf16"} : tensor<256x2304x1024xbf16>
    %78 = form.weight {name = "model.layers.2.block_sparse_moe.shared_experts.gate_proj.weight", format = "bf16"} : tensor<1024x2304xbf16>
    %79 = form.weight {name = "model.layers.2.block_sparse_moe.shared_experts.up_proj.weight", format = "bf16"} : tensor<1024x2304xbf16>
    %80 = form.weight {name = "model.layers.2.block_sparse_moe.shared_experts.down_proj.weight", format = "bf16"} : tensor<2304x1024xbf16>
    %81 = form.weight {name = "model.layers.3.input_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %82 = form.weight {name = "model.layers.3.self_attn.q_proj.weight", format = "bf16"} : tensor<6144x2304xbf16>
    %83 = form.weight {name = "model.layers.3.self_attn.kv_a_proj_with_mqa.weight[0:512]", format = "bf16"} : tensor<512x2304xbf16>
    %84 = form.weight {name = "model.layers.3.self_attn.kv_a_proj_with_mqa.weight[512:576]", format = "bf16"} : tensor<64x2304xbf16>
    %85 = form.weight {name = "model.layers.3.self_attn.kv_a_layernorm.weight", format = "bf16"} : tensor<512xbf16>
    %86 = form.state {name = "model.layers.3.latent", kind = "latent"} : tensor<64x64x576xbf16>
    %87 = form.weight {name = "model.layers.3.self_attn.kv_b_proj.weight", format = "bf16"} : tensor<8192x512xbf16>
    %88 = form.weight {name = "model.layers.3.self_attn.o_proj.weight", format = "bf16"} : tensor<2304x4096xbf16>
    %89 = form.weight {name = "model.layers.3.post_attention_layernorm.weight", format = "bf16"} : tensor<2304xbf16>
    %90 = form.weight {name = "model.layers.3.block_sparse_moe.gate.weight", format = "bf16"} : tensor<256x2304xbf16>
    %91 = form.weight {name = "model.layers.3.block_sparse_moe.gate.e_score_correction_bias", format = "bf16"} : tensor<256xf32>
    %92 = form.weight {name = "model.layers.3.block_sparse_moe.experts.*.w1.weight", format = "bf16"} : tensor<256x1024x2304xbf16>
    %93 = form.weight {name = "model.layers.3.block_sparse_moe.experts.*.w3.weight", format = "bf16"} : tensor<256x1024x2304xbf16>
    %94 = form.weight {name = "model.layers.3.block_sparse_moe.experts.*.w2.weight", format = "bf16"} : tensor<256x2304x1024xbf16>
    %95 = form.weight {name = "model.layers.3.block_sparse_moe.shared_experts.gate_proj.weight", format = "bf16"} : tensor<1024x2304xbf16>
    %96 = form.weight {name = "model.layers.3.block_sparse_moe.shared_experts.up_proj.weight", format = "bf16"} : tensor<1024x2304xbf16>
    %97 = form.weight {name = "model.layers.3.block_sparse_moe.shared_experts.down_proj.weight", format = "bf16"} : tensor<2304x1024xbf16>
    %98 = form.weight {name = "model.norm.weight", format = "bf16"} : tensor<2304xbf16>
    %99 = form.weight {name = "lm_head.weight", format = "bf16"} : tensor<163840x2304xbf16>
    %100 = form.embed %0, %4 : (tensor<1xi32>, tensor<163840x2304xbf16>) -> tensor<1x2304xbf16>
    %101 = form.norm %100, %5 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %102 = form.product %101, %6 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %103 = form.product %101, %7 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %104 = form.product %101, %8 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %105 = form.product %101, %9 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %106 = form.product %101, %10 : (tensor<1x2304xbf16>, tensor<32x2304xbf16>) -> tensor<1x32xbf16>
    %107 = form.product %101, %11 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %108 = form.conv %102, %12, %13, %2 {offset = 0 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %109 = form.conv %103, %12, %14, %2 {offset = 4096 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %110 = form.conv %104, %12, %15, %2 {offset = 8192 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %111 = form.l2norm %108 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %112 = form.l2norm %109 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %113 = form.product %105, %16 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %114 = form.kda_gate %113, %17, %18 {heads = 32 : i64, form = "softplus"} : (tensor<1x4096xbf16>, tensor<32xf32>, tensor<4096xf32>) -> tensor<1x4096xf32>
    %115 = form.sigmoid %106 : (tensor<1x32xbf16>) -> tensor<1x32xbf16>
    %116 = form.delta_rule %111, %112, %110, %114, %115, %19, %2 {heads = 32 : i64, key_heads = 32 : i64, scale = 0.088388347648318447 : f64} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xf32>, tensor<1x32xbf16>, tensor<2x32x128x128xf32>, tensor<1xi32>) -> tensor<1x4096xbf16>
    %117 = form.product %107, %20 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %118 = form.norm_gated %116, %117, %21 {heads = 32 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<128xbf16>) -> tensor<1x4096xbf16>
    %119 = form.product %118, %22 : (tensor<1x4096xbf16>, tensor<2304x4096xbf16>) -> tensor<1x2304xbf16>
    %120 = form.add %100, %119 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %121 = form.norm %120, %23 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %122 = form.product %121, %24 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %123 = form.product %121, %25 : (tensor<1x2304xbf16>, tensor<9216x2304xbf16>) -> tensor<1x9216xbf16>
    %124 = form.swiglu %122, %123 : (tensor<1x9216xbf16>, tensor<1x9216xbf16>) -> tensor<1x9216xbf16>
    %125 = form.product %124, %26 : (tensor<1x9216xbf16>, tensor<2304x9216xbf16>) -> tensor<1x2304xbf16>
    %126 = form.add %120, %125 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %127 = form.norm %126, %27 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %128 = form.product %127, %28 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %129 = form.product %127, %29 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %130 = form.product %127, %30 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %131 = form.product %127, %31 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %132 = form.product %127, %32 : (tensor<1x2304xbf16>, tensor<32x2304xbf16>) -> tensor<1x32xbf16>
    %133 = form.product %127, %33 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %134 = form.conv %128, %34, %35, %2 {offset = 0 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %135 = form.conv %129, %34, %36, %2 {offset = 4096 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %136 = form.conv %130, %34, %37, %2 {offset = 8192 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %137 = form.l2norm %134 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %138 = form.l2norm %135 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %139 = form.product %131, %38 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %140 = form.kda_gate %139, %39, %40 {heads = 32 : i64, form = "softplus"} : (tensor<1x4096xbf16>, tensor<32xf32>, tensor<4096xf32>) -> tensor<1x4096xf32>
    %141 = form.sigmoid %132 : (tensor<1x32xbf16>) -> tensor<1x32xbf16>
    %142 = form.delta_rule %137, %138, %136, %140, %141, %41, %2 {heads = 32 : i64, key_heads = 32 : i64, scale = 0.088388347648318447 : f64} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xf32>, tensor<1x32xbf16>, tensor<2x32x128x128xf32>, tensor<1xi32>) -> tensor<1x4096xbf16>
    %143 = form.product %133, %42 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %144 = form.norm_gated %142, %143, %43 {heads = 32 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<128xbf16>) -> tensor<1x4096xbf16>
    %145 = form.product %144, %44 : (tensor<1x4096xbf16>, tensor<2304x4096xbf16>) -> tensor<1x2304xbf16>
    %146 = form.add %126, %145 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %147 = form.norm %146, %45 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %148 = form.mixture %147, %46, %48, %49, %50 correction %47 : tensor<256xf32> {top_k = 8 : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.446000e+00 : f64} : tensor<1x2304xbf16>, tensor<256x2304xbf16>, tensor<256x1024x2304xbf16>, tensor<256x1024x2304xbf16>, tensor<256x2304x1024xbf16> -> tensor<1x2304xbf16>
    %149 = form.product %147, %51 : (tensor<1x2304xbf16>, tensor<1024x2304xbf16>) -> tensor<1x1024xbf16>
    %150 = form.product %147, %52 : (tensor<1x2304xbf16>, tensor<1024x2304xbf16>) -> tensor<1x1024xbf16>
    %151 = form.swiglu %149, %150 : (tensor<1x1024xbf16>, tensor<1x1024xbf16>) -> tensor<1x1024xbf16>
    %152 = form.product %151, %53 : (tensor<1x1024xbf16>, tensor<2304x1024xbf16>) -> tensor<1x2304xbf16>
    %153 = form.add %148, %152 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %154 = form.add %146, %153 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %155 = form.norm %154, %54 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %156 = form.product %155, %55 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %157 = form.product %155, %56 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %158 = form.product %155, %57 : (tensor<1x2304xbf16>, tensor<4096x2304xbf16>) -> tensor<1x4096xbf16>
    %159 = form.product %155, %58 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %160 = form.product %155, %59 : (tensor<1x2304xbf16>, tensor<32x2304xbf16>) -> tensor<1x32xbf16>
    %161 = form.product %155, %60 : (tensor<1x2304xbf16>, tensor<128x2304xbf16>) -> tensor<1x128xbf16>
    %162 = form.conv %156, %61, %62, %2 {offset = 0 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %163 = form.conv %157, %61, %63, %2 {offset = 4096 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %164 = form.conv %158, %61, %64, %2 {offset = 8192 : i64, activation = "silu"} : tensor<1x4096xbf16>, tensor<2x12288x3xbf16>, tensor<4096x4xbf16>, tensor<1xi32> -> tensor<1x4096xbf16>
    %165 = form.l2norm %162 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %166 = form.l2norm %163 {heads = 32 : i64, eps = 1.000000e-06 : f64} : (tensor<1x4096xbf16>) -> tensor<1x4096xbf16>
    %167 = form.product %159, %65 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %168 = form.kda_gate %167, %66, %67 {heads = 32 : i64, form = "softplus"} : (tensor<1x4096xbf16>, tensor<32xf32>, tensor<4096xf32>) -> tensor<1x4096xf32>
    %169 = form.sigmoid %160 : (tensor<1x32xbf16>) -> tensor<1x32xbf16>
    %170 = form.delta_rule %165, %166, %164, %168, %169, %68, %2 {heads = 32 : i64, key_heads = 32 : i64, scale = 0.088388347648318447 : f64} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<1x4096xf32>, tensor<1x32xbf16>, tensor<2x32x128x128xf32>, tensor<1xi32>) -> tensor<1x4096xbf16>
    %171 = form.product %161, %69 : (tensor<1x128xbf16>, tensor<4096x128xbf16>) -> tensor<1x4096xbf16>
    %172 = form.norm_gated %170, %171, %70 {heads = 32 : i64, eps = 1.000000e-05 : f64, activation = "sigmoid"} : (tensor<1x4096xbf16>, tensor<1x4096xbf16>, tensor<128xbf16>) -> tensor<1x4096xbf16>
    %173 = form.product %172, %71 : (tensor<1x4096xbf16>, tensor<2304x4096xbf16>) -> tensor<1x2304xbf16>
    %174 = form.add %154, %173 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %175 = form.norm %174, %72 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %176 = form.mixture %175, %73, %75, %76, %77 correction %74 : tensor<256xf32> {top_k = 8 : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.446000e+00 : f64} : tensor<1x2304xbf16>, tensor<256x2304xbf16>, tensor<256x1024x2304xbf16>, tensor<256x1024x2304xbf16>, tensor<256x2304x1024xbf16> -> tensor<1x2304xbf16>
    %177 = form.product %175, %78 : (tensor<1x2304xbf16>, tensor<1024x2304xbf16>) -> tensor<1x1024xbf16>
    %178 = form.product %175, %79 : (tensor<1x2304xbf16>, tensor<1024x2304xbf16>) -> tensor<1x1024xbf16>
    %179 = form.swiglu %177, %178 : (tensor<1x1024xbf16>, tensor<1x1024xbf16>) -> tensor<1x1024xbf16>
    %180 = form.product %179, %80 : (tensor<1x1024xbf16>, tensor<2304x1024xbf16>) -> tensor<1x2304xbf16>
    %181 = form.add %176, %180 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %182 = form.add %174, %181 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %183 = form.norm %182, %81 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %184 = form.product %183, %82 : (tensor<1x2304xbf16>, tensor<6144x2304xbf16>) -> tensor<1x6144xbf16>
    %185, %186 = form.product %183, %83, %84 : (tensor<1x2304xbf16>, tensor<512x2304xbf16>, tensor<64x2304xbf16>) -> (tensor<1x512xbf16>, tensor<1x64xbf16>)
    %187 = form.norm %185, %85 {eps = 1.000000e-06 : f64} : (tensor<1x512xbf16>, tensor<512xbf16>) -> tensor<1x512xbf16>
    %188 = form.latent_attention %184, %187, %186, %86, %87, %3, %1 {heads = 32 : i64, nope = 128 : i64, rope = 64 : i64, lora = 512 : i64, v = 128 : i64, scale = 0.072168783648703216 : f64} : (tensor<1x6144xbf16>, tensor<1x512xbf16>, tensor<1x64xbf16>, tensor<64x64x576xbf16>, tensor<8192x512xbf16>, tensor<1x64xi32>, tensor<1xi32>) -> tensor<1x4096xbf16>
    %189 = form.product %188, %88 : (tensor<1x4096xbf16>, tensor<2304x4096xbf16>) -> tensor<1x2304xbf16>
    %190 = form.add %182, %189 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %191 = form.norm %190, %89 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %192 = form.mixture %191, %90, %92, %93, %94 correction %91 : tensor<256xf32> {top_k = 8 : i64, scoring = "sigmoid", renormalize = 1 : i64, routed_scaling = 2.446000e+00 : f64} : tensor<1x2304xbf16>, tensor<256x2304xbf16>, tensor<256x1024x2304xbf16>, tensor<256x1024x2304xbf16>, tensor<256x2304x1024xbf16> -> tensor<1x2304xbf16>
    %193 = form.product %191, %95 : (tensor<1x2304xbf16>, tensor<1024x2304xbf16>) -> tensor<1x1024xbf16>
    %194 = form.product %191, %96 : (tensor<1x2304xbf16>, tensor<1024x2304xbf16>) -> tensor<1x1024xbf16>
    %195 = form.swiglu %193, %194 : (tensor<1x1024xbf16>, tensor<1x1024xbf16>) -> tensor<1x1024xbf16>
    %196 = form.product %195, %97 : (tensor<1x1024xbf16>, tensor<2304x1024xbf16>) -> tensor<1x2304xbf16>
    %197 = form.add %192, %196 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %198 = form.add %190, %197 : (tensor<1x2304xbf16>, tensor<1x2304xbf16>) -> tensor<1x2304xbf16>
    %199 = form.norm %198, %98 {eps = 1.000000e-05 : f64} : (tensor<1x2304xbf16>, tensor<2304xbf16>) -> tensor<1x2304xbf16>
    %200 = form.product %199, %99 : (tensor<1x2304xbf16>, tensor<163840x2304xbf16>) -> tensor<1x163840xbf16>
    %201 = form.argmax %200 : (tensor<1x163840xbf16>) -> tensor<1xi32>
    form.return %201, %200 : tensor<1xi32>, tensor<1x163840xbf16>
  }
}
