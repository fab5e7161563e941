// RUN: %shard-opt %s | %shard-opt | FileCheck %s
// RUN: %shard-opt --nn-verify %s | FileCheck %s

// Every nn op parses, passes IRDL's constraints and nn-verify, prints, and
// parses back to the same text.

// CHECK-LABEL: func.func @embedding
// CHECK: "nn.embedding"(%arg0, %arg1) {nn.module = "model.embed_tokens", padding_idx = -1 : i64, scale = 3.200000e+01 : f64} : (tensor<2x8xi64>, tensor<256x64xf32>) -> tensor<2x8x64xf32>
func.func @embedding(%ids: tensor<2x8xi64>, %w: tensor<256x64xf32>) -> tensor<2x8x64xf32> {
  %0 = "nn.embedding"(%ids, %w) {padding_idx = -1 : i64, scale = 32.0 : f64, nn.module = "model.embed_tokens"} : (tensor<2x8xi64>, tensor<256x64xf32>) -> tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}

// CHECK-LABEL: func.func @linear
// CHECK: "nn.linear"(%arg0, %arg1, %arg2) {nn.module = "q_proj"} : (tensor<2x8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// CHECK: "nn.linear"(%arg0, %arg1) {nn.module = "k_proj"} : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
func.func @linear(%x: tensor<2x8x64xf32>, %w: tensor<32x64xf32>, %b: tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>) {
  %0 = "nn.linear"(%x, %w, %b) {nn.module = "q_proj"} : (tensor<2x8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %1 = "nn.linear"(%x, %w) {nn.module = "k_proj"} : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
  return %0, %1 : tensor<2x8x32xf32>, tensor<2x8x32xf32>
}

// CHECK-LABEL: func.func @rms_norm
// CHECK: "nn.rms_norm"(%arg0, %arg1) {eps = 9.9999999999999995E-7 : f64, head_dim = 0 : i64, nn.module = "input_layernorm", offset = 1.000000e+00 : f64}
// CHECK: "nn.rms_norm"(%arg0, %arg2) {eps = 9.9999999999999995E-7 : f64, head_dim = 16 : i64, nn.module = "q_norm", offset = 0.000000e+00 : f64}
func.func @rms_norm(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>, %wq: tensor<16xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %0 = "nn.rms_norm"(%x, %w) {nn.module = "input_layernorm", eps = 1.0e-6 : f64, offset = 1.0 : f64, head_dim = 0 : i64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %1 = "nn.rms_norm"(%x, %wq) {nn.module = "q_norm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = 16 : i64} : (tensor<2x8x64xf32>, tensor<16xf32>) -> tensor<2x8x64xf32>
  return %0, %1 : tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// CHECK-LABEL: func.func @rotary
// CHECK: "nn.rotary_embedding"() {head_dim = 16 : i64, nn.module = "model.rotary_emb", rope_type = "default", theta = 1.000000e+04 : f64} : () -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
// CHECK: "nn.rotary_embedding"(%arg1) {factor = 3.200000e+01 : f64, head_dim = 16 : i64, high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, nn.module = "model.rotary_emb", original_max_position_embeddings = 8192 : i64, rope_type = "llama3", theta = 5.000000e+05 : f64} : (tensor<2x8xi64>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
// CHECK: "nn.apply_rotary"(%arg0, %{{.*}}#0, %{{.*}}#1) {head_dim = 16 : i64, nn.module = "self_attn"}
func.func @rotary(%x: tensor<2x8x64xf32>, %pos: tensor<2x8xi64>) -> tensor<2x8x64xf32> {
  %c:2 = "nn.rotary_embedding"() {nn.module = "model.rotary_emb", head_dim = 16 : i64, theta = 10000.0 : f64, rope_type = "default"} : () -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %l:2 = "nn.rotary_embedding"(%pos) {nn.module = "model.rotary_emb", head_dim = 16 : i64, theta = 500000.0 : f64, rope_type = "llama3", factor = 32.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position_embeddings = 8192 : i64} : (tensor<2x8xi64>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %0 = "nn.apply_rotary"(%x, %l#0, %l#1) {nn.module = "self_attn", head_dim = 16 : i64} : (tensor<2x8x64xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}

// CHECK-LABEL: func.func @attention
// CHECK: "nn.attention"(%arg0, %arg1, %arg1) {causal = true, head_dim = 16 : i64, nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 6.250000e-02 : f64, sliding_window = 4 : i64, softcap = 5.000000e+01 : f64}
func.func @attention(%q: tensor<2x8x64xf32>, %kv: tensor<2x8x16xf32>) -> tensor<2x8x64xf32> {
  %0, %lse = "nn.attention"(%q, %kv, %kv) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 1 : i64, head_dim = 16 : i64, causal = true, scale = 0.0625 : f64, sliding_window = 4 : i64, softcap = 50.0 : f64} : (tensor<2x8x64xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x64xf32>, tensor<2x4x8xf32>)
  return %0 : tensor<2x8x64xf32>
}

// CHECK-LABEL: func.func @mlp
// CHECK: "nn.glu"(%arg0, %arg1) {activation = "gelu_tanh", nn.module = "mlp"}
// CHECK: "nn.relu2"(%{{.*}}) {nn.module = "mixer"}
// CHECK: "nn.add"(%arg0, %{{.*}}) {nn.module = "layers.0"}
func.func @mlp(%g: tensor<2x8x128xbf16>, %u: tensor<2x8x128xbf16>) -> tensor<2x8x128xbf16> {
  %0 = "nn.glu"(%g, %u) {nn.module = "mlp", activation = "gelu_tanh"} : (tensor<2x8x128xbf16>, tensor<2x8x128xbf16>) -> tensor<2x8x128xbf16>
  %1 = "nn.relu2"(%0) {nn.module = "mixer"} : (tensor<2x8x128xbf16>) -> tensor<2x8x128xbf16>
  %2 = "nn.add"(%g, %1) {nn.module = "layers.0"} : (tensor<2x8x128xbf16>, tensor<2x8x128xbf16>) -> tensor<2x8x128xbf16>
  return %2 : tensor<2x8x128xbf16>
}

// CHECK-LABEL: func.func @loss
// CHECK: "nn.cross_entropy"(%arg0, %arg1) {ignore_index = -100 : i64, nn.module = "loss", shift = true} : (tensor<2x8x256xf32>, tensor<2x8xi64>) -> tensor<f32>
func.func @loss(%logits: tensor<2x8x256xf32>, %labels: tensor<2x8xi64>) -> tensor<f32> {
  %0 = "nn.cross_entropy"(%logits, %labels) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<2x8x256xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}
