// A one-layer Qwen2-architecture causal LM in the nn dialect: batch 2,
// sequence 8, hidden 64, 4 query heads and 2 KV heads of dim 16 (GQA),
// intermediate 128, byte-level vocabulary 256, tied embeddings, biases on
// q/k/v only. Parameters carry their Hugging Face names (nn.param), ops
// their module paths (nn.module).
func.func @forward(%input_ids: tensor<2x8xi64>, %labels: tensor<2x8xi64>,
    %embed: tensor<256x64xf32> {nn.param = "model.embed_tokens.weight"},
    %ln1: tensor<64xf32> {nn.param = "model.layers.0.input_layernorm.weight"},
    %wq: tensor<64x64xf32> {nn.param = "model.layers.0.self_attn.q_proj.weight"},
    %bq: tensor<64xf32> {nn.param = "model.layers.0.self_attn.q_proj.bias"},
    %wk: tensor<32x64xf32> {nn.param = "model.layers.0.self_attn.k_proj.weight"},
    %bk: tensor<32xf32> {nn.param = "model.layers.0.self_attn.k_proj.bias"},
    %wv: tensor<32x64xf32> {nn.param = "model.layers.0.self_attn.v_proj.weight"},
    %bv: tensor<32xf32> {nn.param = "model.layers.0.self_attn.v_proj.bias"},
    %wo: tensor<64x64xf32> {nn.param = "model.layers.0.self_attn.o_proj.weight"},
    %ln2: tensor<64xf32> {nn.param = "model.layers.0.post_attention_layernorm.weight"},
    %wg: tensor<128x64xf32> {nn.param = "model.layers.0.mlp.gate_proj.weight"},
    %wu: tensor<128x64xf32> {nn.param = "model.layers.0.mlp.up_proj.weight"},
    %wd: tensor<64x128xf32> {nn.param = "model.layers.0.mlp.down_proj.weight"},
    %lnf: tensor<64xf32> {nn.param = "model.norm.weight"}) -> tensor<f32> {
  %x = "nn.embedding"(%input_ids, %embed) {padding_idx = -1 : i64, nn.module = "model.embed_tokens", scale = 1.0 : f64} : (tensor<2x8xi64>, tensor<256x64xf32>) -> tensor<2x8x64xf32>
  %cos, %sin = "nn.rotary_embedding"() {nn.module = "model.rotary_emb", head_dim = 16 : i64, theta = 1000000.0 : f64, rope_type = "default"} : () -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %h = "nn.rms_norm"(%x, %ln1) {nn.module = "model.layers.0.input_layernorm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = 0 : i64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %q = "nn.linear"(%h, %wq, %bq) {nn.module = "model.layers.0.self_attn.q_proj"} : (tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %k = "nn.linear"(%h, %wk, %bk) {nn.module = "model.layers.0.self_attn.k_proj"} : (tensor<2x8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %v = "nn.linear"(%h, %wv, %bv) {nn.module = "model.layers.0.self_attn.v_proj"} : (tensor<2x8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %qr = "nn.apply_rotary"(%q, %cos, %sin) {nn.module = "model.layers.0.self_attn", head_dim = 16 : i64} : (tensor<2x8x64xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x64xf32>
  %kr = "nn.apply_rotary"(%k, %cos, %sin) {nn.module = "model.layers.0.self_attn", head_dim = 16 : i64} : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x32xf32>
  %a, %lse = "nn.attention"(%qr, %kr, %v) {nn.module = "model.layers.0.self_attn", num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, causal = true, scale = 0.25 : f64, sliding_window = 0 : i64, softcap = 0.0 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> (tensor<2x8x64xf32>, tensor<2x4x8xf32>)
  %o = "nn.linear"(%a, %wo) {nn.module = "model.layers.0.self_attn.o_proj"} : (tensor<2x8x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  %x1 = "nn.add"(%x, %o) {nn.module = "model.layers.0"} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %h2 = "nn.rms_norm"(%x1, %ln2) {nn.module = "model.layers.0.post_attention_layernorm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = 0 : i64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %g = "nn.linear"(%h2, %wg) {nn.module = "model.layers.0.mlp.gate_proj"} : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<2x8x128xf32>
  %u = "nn.linear"(%h2, %wu) {nn.module = "model.layers.0.mlp.up_proj"} : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<2x8x128xf32>
  %m = "nn.glu"(%g, %u) {nn.module = "model.layers.0.mlp", activation = "silu"} : (tensor<2x8x128xf32>, tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  %d = "nn.linear"(%m, %wd) {nn.module = "model.layers.0.mlp.down_proj"} : (tensor<2x8x128xf32>, tensor<64x128xf32>) -> tensor<2x8x64xf32>
  %x2 = "nn.add"(%x1, %d) {nn.module = "model.layers.0"} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %n = "nn.rms_norm"(%x2, %lnf) {nn.module = "model.norm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = 0 : i64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %logits = "nn.linear"(%n, %embed) {nn.module = "lm_head"} : (tensor<2x8x64xf32>, tensor<256x64xf32>) -> tensor<2x8x256xf32>
  %loss = "nn.cross_entropy"(%logits, %labels) {nn.module = "loss", ignore_index = -100 : i64, shift = true} : (tensor<2x8x256xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
