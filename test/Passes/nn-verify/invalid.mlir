// One case per nn-verify check: each error names the op, its nn.module,
// the dimension and the values, at the op's line.
// RUN: %shard-opt --split-input-file --verify-diagnostics --nn-verify %s
// What --verify-diagnostics leaves unchecked: the failing exit status, the
// file and each error's column (COL, at the op's first token).
// RUN: not %shard-opt --split-input-file --nn-verify %s 2>&1 | FileCheck %s --check-prefix=COL

func.func @missing_module(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.relu2' (no nn.module): missing the 'nn.module' string attribute}}
  %0 = "nn.relu2"(%x) : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @dynamic_shape(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.relu2' (m): input must be a statically shaped ranked tensor}}
  %0 = "nn.relu2"(%x) {nn.module = "m"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

func.func @integer_elementwise(%x: tensor<2x8xi32>) -> tensor<2x8xi32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.add' (layers.0): operands must have a floating-point element type}}
  %0 = "nn.add"(%x, %x) {nn.module = "layers.0"} : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  return %0 : tensor<2x8xi32>
}

// -----

func.func @embedding_ids_rank(%ids: tensor<8xi64>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.embedding' (embed_tokens): input_ids must have rank 2, got shape [8]}}
  %0 = "nn.embedding"(%ids, %w) {padding_idx = -1 : i64, nn.module = "embed_tokens", scale = 1.0 : f64} : (tensor<8xi64>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @embedding_ids_float(%ids: tensor<2x8xf32>, %w: tensor<16x4xf32>) -> tensor<2x8x4xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.embedding' (embed_tokens): input_ids must have an integer element type}}
  %0 = "nn.embedding"(%ids, %w) {padding_idx = -1 : i64, nn.module = "embed_tokens", scale = 1.0 : f64} : (tensor<2x8xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  return %0 : tensor<2x8x4xf32>
}

// -----

func.func @embedding_output(%ids: tensor<2x8xi64>, %w: tensor<16x4xf32>) -> tensor<2x8x16xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.embedding' (embed_tokens): output has shape [2, 8, 16], expected [2, 8, 4]}}
  %0 = "nn.embedding"(%ids, %w) {padding_idx = -1 : i64, nn.module = "embed_tokens", scale = 1.0 : f64} : (tensor<2x8xi64>, tensor<16x4xf32>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// -----

func.func @linear_weight_rank(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.linear' (q_proj): weight must have rank 2, got shape [8]}}
  %0 = "nn.linear"(%x, %w) {nn.module = "q_proj"} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @linear_in_features(%x: tensor<2x8xf32>, %w: tensor<4x6xf32>) -> tensor<2x4xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.linear' (q_proj): weight in_features (dim 1) is 6 but the input's last dim is 8}}
  %0 = "nn.linear"(%x, %w) {nn.module = "q_proj"} : (tensor<2x8xf32>, tensor<4x6xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @linear_bias(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<2x4xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.linear' (q_proj): bias has shape [8], expected [4] (out_features)}}
  %0 = "nn.linear"(%x, %w, %b) {nn.module = "q_proj"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @linear_output(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.linear' (q_proj): output has shape [2, 8], expected [2, 4]}}
  %0 = "nn.linear"(%x, %w) {nn.module = "q_proj"} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rms_norm_eps(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.rms_norm' (norm): attribute 'eps' must be positive, got 0}}
  %0 = "nn.rms_norm"(%x, %w) {nn.module = "norm", eps = 0.0 : f64, offset = 0.0 : f64, head_dim = 0 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rms_norm_weight_rank(%x: tensor<2x8xf32>, %w: tensor<1x8xf32>) -> tensor<2x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.rms_norm' (norm): weight must have rank 1, got shape [1, 8]}}
  %0 = "nn.rms_norm"(%x, %w) {nn.module = "norm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = 0 : i64} : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rms_norm_weight_size(%x: tensor<2x8xf32>, %w: tensor<6xf32>) -> tensor<2x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.rms_norm' (norm): weight has 6 elements but the input's last dim is 8}}
  %0 = "nn.rms_norm"(%x, %w) {nn.module = "norm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = 0 : i64} : (tensor<2x8xf32>, tensor<6xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rms_norm_negative_group(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.rms_norm' (norm): attribute 'head_dim' must be 0 (whole last dim) or positive, got -2}}
  %0 = "nn.rms_norm"(%x, %w) {nn.module = "norm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = -2 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rms_norm_group_weight(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.rms_norm' (q_norm): weight has 8 elements but head_dim is 4}}
  %0 = "nn.rms_norm"(%x, %w) {nn.module = "q_norm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = 4 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rms_norm_group_divides(%x: tensor<2x10xf32>, %w: tensor<4xf32>) -> tensor<2x10xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.rms_norm' (q_norm): input's last dim 10 is not a multiple of head_dim 4}}
  %0 = "nn.rms_norm"(%x, %w) {nn.module = "q_norm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = 4 : i64} : (tensor<2x10xf32>, tensor<4xf32>) -> tensor<2x10xf32>
  return %0 : tensor<2x10xf32>
}

// -----

func.func @rotary_rank() -> tensor<4x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): cos must have rank 3, got shape [4, 8]}}
  %0:2 = "nn.rotary_embedding"() {nn.module = "rotary_emb", head_dim = 8 : i64, theta = 1.0e4 : f64, rope_type = "default"} : () -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %0#0 : tensor<4x8xf32>
}

// -----

func.func @rotary_odd_head_dim() -> tensor<1x4x7xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): attribute 'head_dim' must be positive and even, got 7}}
  %0:2 = "nn.rotary_embedding"() {nn.module = "rotary_emb", head_dim = 7 : i64, theta = 1.0e4 : f64, rope_type = "default"} : () -> (tensor<1x4x7xf32>, tensor<1x4x7xf32>)
  return %0#0 : tensor<1x4x7xf32>
}

// -----

func.func @rotary_head_dim_mismatch() -> tensor<1x4x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): cos/sin last dim is 8 but head_dim is 16}}
  %0:2 = "nn.rotary_embedding"() {nn.module = "rotary_emb", head_dim = 16 : i64, theta = 1.0e4 : f64, rope_type = "default"} : () -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %0#0 : tensor<1x4x8xf32>
}

// -----

func.func @rotary_theta() -> tensor<1x4x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): attribute 'theta' must be positive, got -1}}
  %0:2 = "nn.rotary_embedding"() {nn.module = "rotary_emb", head_dim = 8 : i64, theta = -1.0 : f64, rope_type = "default"} : () -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %0#0 : tensor<1x4x8xf32>
}

// -----

func.func @rotary_positions_shape(%p: tensor<1x5xi64>) -> tensor<1x4x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): position_ids has shape [1, 5], expected [1, 4]}}
  %0:2 = "nn.rotary_embedding"(%p) {nn.module = "rotary_emb", head_dim = 8 : i64, theta = 1.0e4 : f64, rope_type = "default"} : (tensor<1x5xi64>) -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %0#0 : tensor<1x4x8xf32>
}

// -----

func.func @rotary_positions_float(%p: tensor<1x4xf32>) -> tensor<1x4x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): position_ids must have an integer element type}}
  %0:2 = "nn.rotary_embedding"(%p) {nn.module = "rotary_emb", head_dim = 8 : i64, theta = 1.0e4 : f64, rope_type = "default"} : (tensor<1x4xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %0#0 : tensor<1x4x8xf32>
}

// -----

func.func @linear_missing_factor() -> tensor<1x4x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): rope_type 'linear' needs a positive float attribute 'factor'}}
  %0:2 = "nn.rotary_embedding"() {nn.module = "rotary_emb", head_dim = 8 : i64, theta = 1.0e6 : f64, rope_type = "linear"} : () -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %0#0 : tensor<1x4x8xf32>
}

// -----

func.func @llama3_missing_factor() -> tensor<1x4x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): rope_type 'llama3' needs a positive float attribute 'factor'}}
  %0:2 = "nn.rotary_embedding"() {nn.module = "rotary_emb", head_dim = 8 : i64, theta = 5.0e5 : f64, rope_type = "llama3", low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position_embeddings = 8192 : i64} : () -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %0#0 : tensor<1x4x8xf32>
}

// -----

func.func @llama3_freq_order() -> tensor<1x4x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): llama3 low_freq_factor 4 must be below high_freq_factor 1}}
  %0:2 = "nn.rotary_embedding"() {nn.module = "rotary_emb", head_dim = 8 : i64, theta = 5.0e5 : f64, rope_type = "llama3", factor = 8.0 : f64, low_freq_factor = 4.0 : f64, high_freq_factor = 1.0 : f64, original_max_position_embeddings = 8192 : i64} : () -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %0#0 : tensor<1x4x8xf32>
}

// -----

func.func @llama3_original_max() -> tensor<1x4x8xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.rotary_embedding' (rotary_emb): attribute 'original_max_position_embeddings' must be positive, got 0}}
  %0:2 = "nn.rotary_embedding"() {nn.module = "rotary_emb", head_dim = 8 : i64, theta = 5.0e5 : f64, rope_type = "llama3", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64} : () -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
  return %0#0 : tensor<1x4x8xf32>
}

// -----

func.func @apply_rotary_rank(%x: tensor<4x16xf32>, %c: tensor<1x4x8xf32>) -> tensor<4x16xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.apply_rotary' (self_attn): input must have rank 3, got shape [4, 16]}}
  %0 = "nn.apply_rotary"(%x, %c, %c) {nn.module = "self_attn", head_dim = 8 : i64} : (tensor<4x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @apply_rotary_head_dim(%x: tensor<1x4x16xf32>, %c: tensor<1x4x8xf32>) -> tensor<1x4x16xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.apply_rotary' (self_attn): attribute 'head_dim' must be positive and even, got 0}}
  %0 = "nn.apply_rotary"(%x, %c, %c) {nn.module = "self_attn", head_dim = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x16xf32>
  return %0 : tensor<1x4x16xf32>
}

// -----

func.func @apply_rotary_heads(%x: tensor<1x4x12xf32>, %c: tensor<1x4x8xf32>) -> tensor<1x4x12xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.apply_rotary' (self_attn): input's last dim 12 is not a multiple of head_dim 8}}
  %0 = "nn.apply_rotary"(%x, %c, %c) {nn.module = "self_attn", head_dim = 8 : i64} : (tensor<1x4x12xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x12xf32>
  return %0 : tensor<1x4x12xf32>
}

// -----

func.func @apply_rotary_cos_shape(%x: tensor<1x4x16xf32>, %c: tensor<1x2x8xf32>) -> tensor<1x4x16xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.apply_rotary' (self_attn): cos/sin has shape [1, 2, 8], expected [1, 4, 8]}}
  %0 = "nn.apply_rotary"(%x, %c, %c) {nn.module = "self_attn", head_dim = 8 : i64} : (tensor<1x4x16xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> tensor<1x4x16xf32>
  return %0 : tensor<1x4x16xf32>
}

// -----

func.func @attention_rank(%q: tensor<4x32xf32>, %k: tensor<4x16xf32>) -> tensor<4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): query must have rank 3, got shape [4, 32]}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<4x32xf32>, tensor<4x16xf32>, tensor<4x16xf32>) -> (tensor<4x32xf32>, tensor<4x4x32xf32>)
  return %0 : tensor<4x32xf32>
}

// -----

func.func @attention_heads_positive(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): attribute 'num_heads' must be positive, got 0}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 0 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x32xf32>, tensor<1x1x4xf32>)
  return %0 : tensor<1x4x32xf32>
}

// -----

func.func @attention_gqa(%q: tensor<1x4x24xf32>, %k: tensor<1x4x16xf32>) -> tensor<1x4x24xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): num_heads 3 is not divisible by num_kv_heads 2 (GQA)}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 3 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x24xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x24xf32>, tensor<1x3x4xf32>)
  return %0 : tensor<1x4x24xf32>
}

// -----

func.func @attention_query_dim(%q: tensor<1x4x40xf32>, %k: tensor<1x4x16xf32>) -> tensor<1x4x40xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): query's last dim is 40 but num_heads x head_dim = 4 x 8 = 32}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x40xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x40xf32>, tensor<1x4x4xf32>)
  return %0 : tensor<1x4x40xf32>
}

// -----

func.func @attention_kv_dim(%q: tensor<1x4x32xf32>, %k: tensor<1x4x24xf32>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): key/value last dim is 24 but num_kv_heads x head_dim = 2 x 8 = 16}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x32xf32>, tensor<1x4x24xf32>, tensor<1x4x24xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x4xf32>)
  return %0 : tensor<1x4x32xf32>
}

// -----

func.func @attention_segments_shape(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>, %s: tensor<1x5xi64>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): segment_ids has shape [1, 5], expected [1, 4]}}
  %0, %lse = "nn.attention"(%q, %k, %k, %s) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x5xi64>) -> (tensor<1x4x32xf32>, tensor<1x4x4xf32>)
  return %0 : tensor<1x4x32xf32>
}

// -----

func.func @attention_segments_float(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>, %s: tensor<1x4xf32>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): segment_ids must have an integer element type}}
  %0, %lse = "nn.attention"(%q, %k, %k, %s) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x4xf32>)
  return %0 : tensor<1x4x32xf32>
}

// -----

func.func @attention_seq(%q: tensor<1x4x32xf32>, %k: tensor<1x2x16xf32>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): query batch x seq 1 x 4 differs from key's 1 x 2}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x4xf32>)
  return %0 : tensor<1x4x32xf32>
}

// -----

func.func @attention_scale(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): attribute 'scale' must be positive, got 0}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.0 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x4xf32>)
  return %0 : tensor<1x4x32xf32>
}

// -----

func.func @attention_window(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): attribute 'sliding_window' must be 0 (none) or positive, got -1}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = -1 : i64, softcap = 0.0 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x4xf32>)
  return %0 : tensor<1x4x32xf32>
}

// -----

func.func @attention_softcap(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): attribute 'softcap' must be 0 (none) or positive, got -5}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = -5.0 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x4xf32>)
  return %0 : tensor<1x4x32xf32>
}

// -----

func.func @attention_lse_shape(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:14: error:
  // expected-error @+1 {{'nn.attention' (self_attn): lse has shape [1, 4, 3], expected [1, 4, 4]}}
  %0, %lse = "nn.attention"(%q, %k, %k) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x3xf32>)
  return %0 : tensor<1x4x32xf32>
}

// -----

func.func @attention_grad_lse_type(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>, %l: tensor<1x4x4xf64>) -> tensor<1x4x32xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:10: error:
  // expected-error @+1 {{'nn.attention_grad' (self_attn): lse must have element type f32 (the log-sum-exp is kept in fp32)}}
  %0:3 = "nn.attention_grad"(%q, %k, %k, %q, %l, %q) {nn.module = "self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, causal = true, scale = 0.35 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x32xf32>, tensor<1x4x4xf64>, tensor<1x4x32xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x32xf32>
}

// -----

func.func @ce_logits_rank(%l: tensor<8x16xf32>, %y: tensor<1x8xi64>) -> tensor<f32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.cross_entropy' (loss): logits must have rank 3, got shape [8, 16]}}
  %0 = "nn.cross_entropy"(%l, %y) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<8x16xf32>, tensor<1x8xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @ce_labels_float(%l: tensor<1x8x16xf32>, %y: tensor<1x8xf32>) -> tensor<f32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.cross_entropy' (loss): labels must have an integer element type}}
  %0 = "nn.cross_entropy"(%l, %y) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<1x8x16xf32>, tensor<1x8xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @ce_labels_shape(%l: tensor<1x8x16xf32>, %y: tensor<1x6xi64>) -> tensor<f32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.cross_entropy' (loss): labels shape [1, 6] does not match logits batch x seq 1 x 8}}
  %0 = "nn.cross_entropy"(%l, %y) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<1x8x16xf32>, tensor<1x6xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @ce_loss_type(%l: tensor<1x8x16xf32>, %y: tensor<1x8xi64>) -> tensor<1xf32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.cross_entropy' (loss): loss must be tensor<f32>}}
  %0 = "nn.cross_entropy"(%l, %y) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<1x8x16xf32>, tensor<1x8xi64>) -> tensor<1xf32>
  return %0 : tensor<1xf32>
}

// -----

func.func @ce_shift_short(%l: tensor<1x1x16xf32>, %y: tensor<1x1xi64>) -> tensor<f32> {
  // COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.cross_entropy' (loss): shifted labels need a sequence of at least 2, got 1}}
  %0 = "nn.cross_entropy"(%l, %y) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<1x1x16xf32>, tensor<1x1xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Two arguments that claim one parameter (a checkpoint could not tell them
// apart): refused up front, not at the end of a training run.
// COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:1: error:
// expected-error @+1 {{arguments 0 and 2 are both the parameter 'model.norm.weight' (nn.param names must be unique)}}
func.func @duplicate_param(%a: tensor<8xf32> {nn.param = "model.norm.weight"}, %b: tensor<8xf32> {nn.param = "other"}, %c: tensor<8xf32> {nn.param = "model.norm.weight"}) -> tensor<8xf32> {
  return %a : tensor<8xf32>
}

// -----

// nn.param names a tensor: a string, nothing else.
// COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:1: error:
// expected-error @+1 {{argument 1: nn.param must be a string (the Hugging Face tensor name)}}
func.func @param_not_string(%a: tensor<4xf32> {nn.param = "a"}, %b: tensor<4xf32> {nn.param = 5 : i64}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// nn.init is one of the inits the runtime knows, on a parameter only.
// COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+4]]:1: error:
// expected-error @+3 {{argument 1: nn.init must be one of "normal", "zeros", "ones", "a_log", "dt_bias"}}
// COL: nn-verify{{/|\\}}invalid.mlir:[[@LINE+2]]:1: error:
// expected-error @+1 {{argument 2: nn.init is only for parameters (arguments with nn.param)}}
func.func @bad_init(%a: tensor<4xf32> {nn.init = "ones", nn.param = "a"}, %b: tensor<4xf32> {nn.init = "uniform", nn.param = "b"}, %c: tensor<4xf32> {nn.init = "zeros"}) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
