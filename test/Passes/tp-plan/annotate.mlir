// tp-plan alone: the plan becomes upstream shard annotations (the grid, the
// parameters' shardings, module inputs for their users, module outputs);
// tp-partition then consumes them.
// RUN: %shard-opt --pass-pipeline='builtin.module(tp-plan{plan=qwen2 tp=2})' %s | FileCheck %s
// RUN: %shard-opt --pass-pipeline='builtin.module(tp-plan{plan=qwen2 tp=2 dp=2 sequence-parallel=true})' %s | FileCheck %s --check-prefix=SPDP
// A plan entry that matches no module is a warning, not an error.
// RUN: %shard-opt --pass-pipeline='builtin.module(tp-plan{plan=%S/Inputs/extra-entry.json tp=2})' %s 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN
// RUN: not %shard-opt --pass-pipeline='builtin.module(tp-partition)' %s 2>&1 | FileCheck %s --check-prefix=NOGRID

// CHECK: shard.grid @mesh(shape = 1x2)
// CHECK-LABEL: func.func @forward
// Parameters: the vocabulary-parallel embedding, colwise q and its bias, rowwise o.
// CHECK: shard.sharding @mesh split_axes = {{\[\[1\]\]}} : !shard.sharding
// CHECK: shard.shard %arg2 to %{{.*}} : tensor<256x64xf32>
// CHECK: shard.shard %arg4 to %{{.*}} : tensor<64x64xf32>
// CHECK: shard.shard %arg5 to %{{.*}} : tensor<64xf32>
// q_proj's input is wanted Replicate by its users; its output is Shard(-1).
// CHECK: shard.shard %{{.*}} annotate_for_users : tensor<2x8x64xf32>
// CHECK: "nn.linear"({{.*}}"model.layers.0.self_attn.q_proj"
// CHECK-NEXT: shard.sharding @mesh split_axes = {{\[\[\], \[\], \[1\]\]}}
// CHECK-NEXT: = shard.shard %{{[0-9]+}} to

// dp=2: the batch of input_ids and labels is split on mesh axis 0; sequence
// parallel splits the embedding output's sequence on axis 1.
// SPDP: shard.grid @mesh(shape = 2x2)
// SPDP: shard.sharding @mesh split_axes = {{\[\[0\]\]}}
// SPDP: "nn.embedding"
// SPDP-NEXT: shard.sharding @mesh split_axes = {{\[\[0\], \[1\]\]}}

// WARN: warning: tp-plan: {{.*}}extra-entry.json: plan entry 'model.vision_tower.*' matches no module
// NOGRID: error: tp-partition: no 2-D shard.grid @mesh (dp x tp) in the module: run tp-plan first
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
