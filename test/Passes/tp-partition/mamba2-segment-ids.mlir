// nn.mamba2_mixer with segment_ids (operand 9, packed documents) through
// nn-autodiff and the partitioner: the gradient op takes them at 9 and dy
// at 10, and has nine results (none for them); at dp 2 x tp 2 they are
// split like the batch (Shard(0) on dp) and replicated over tp, where the
// mixer's heads are split, and no collective ever moves them (with
// sequence parallelism neither).
// RUN: %shard-opt --nn-verify --nn-autodiff %s -o %t.mlir
// RUN: FileCheck %s --check-prefix=AD < %t.mlir
// RUN: %shard-opt --tp-plan=nemotron_h --tp-size=2 --dp-size=2 %t.mlir 2>/dev/null > %t.mesh.mlir
// RUN: FileCheck %s --check-prefix=MESH < %t.mesh.mlir
// RUN: not grep -E 'shard\.(all_|reduce_scatter).*xi64' %t.mesh.mlir
// RUN: %shard-opt --tp-plan=nemotron_h --tp-size=2 --sequence-parallel %t.mlir 2>/dev/null > %t.sp.mlir
// RUN: FileCheck %s --check-prefix=SP < %t.sp.mlir
// RUN: not grep -E 'shard\.(all_|reduce_scatter).*xi64' %t.sp.mlir

// AD: "nn.mamba2_mixer"(%{{[0-9]+}}, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg2)
// AD: "nn.mamba2_mixer_grad"(%{{[0-9]+}}, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg2, %{{[0-9]+}}) {{.*}} : ({{.*}}, tensor<32x32xf32>, tensor<2x8xi64>, tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<136x32xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<32xf32>, tensor<32x32xf32>)

// MESH: %arg2: tensor<1x8xi64> {nn.global_shape = array<i64: 2, 8>, nn.placements = ["Shard(0)", "Replicate"]}
// MESH: "nn.mamba2_mixer"({{.*}}, %arg2) {{.*}}n_groups = 2 : i64{{.*}}num_heads = 4 : i64{{.*}} : (tensor<1x8x32xf32>, tensor<68x32xf32>, {{.*}}, tensor<32x16xf32>, tensor<1x8xi64>) -> tensor<1x8x32xf32>
// MESH: "nn.mamba2_mixer_grad"({{.*}}, %arg2, %{{[0-9]+}}) {{.*}}num_heads = 4 : i64{{.*}} : ({{.*}}, tensor<32x16xf32>, tensor<1x8xi64>, tensor<1x8x32xf32>) ->

// SP: %arg2: tensor<2x8xi64> {nn.global_shape = array<i64: 2, 8>, nn.placements = ["Replicate", "Replicate"]}
// SP: "nn.mamba2_mixer"({{.*}}, %arg2) {{.*}} : (tensor<2x8x32xf32>, tensor<68x32xf32>, {{.*}}, tensor<32x16xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>

module attributes {nn.flops_per_token = 6.580800e+04 : f64, nn.initializer_range = 2.000000e-02 : f64, nn.model_type = "nemotron_h"} {
  func.func @forward(%arg0: tensor<2x8xi64>, %arg1: tensor<2x8xi64>, %arg2: tensor<2x8xi64>, %arg3: tensor<128x32xf32> {nn.init = "normal", nn.param = "backbone.embeddings.weight"}, %arg4: tensor<32xf32> {nn.init = "ones", nn.param = "backbone.layers.0.norm.weight"}, %arg5: tensor<136x32xf32> {nn.init = "normal", nn.param = "backbone.layers.0.mixer.in_proj.weight"}, %arg6: tensor<96x1x4xf32> {nn.init = "normal", nn.param = "backbone.layers.0.mixer.conv1d.weight"}, %arg7: tensor<96xf32> {nn.init = "zeros", nn.param = "backbone.layers.0.mixer.conv1d.bias"}, %arg8: tensor<8xf32> {nn.init = "dt_bias", nn.param = "backbone.layers.0.mixer.dt_bias"}, %arg9: tensor<8xf32> {nn.init = "a_log", nn.param = "backbone.layers.0.mixer.A_log"}, %arg10: tensor<8xf32> {nn.init = "ones", nn.param = "backbone.layers.0.mixer.D"}, %arg11: tensor<32xf32> {nn.init = "ones", nn.param = "backbone.layers.0.mixer.norm.weight"}, %arg12: tensor<32x32xf32> {nn.init = "normal", nn.param = "backbone.layers.0.mixer.out_proj.weight"}, %arg13: tensor<32xf32> {nn.init = "ones", nn.param = "backbone.norm_f.weight"}, %arg14: tensor<128x32xf32> {nn.init = "normal", nn.param = "lm_head.weight"}) -> tensor<f32> {
    %0 = "nn.embedding"(%arg0, %arg3) {nn.module = "backbone.embeddings", padding_idx = -1 : i64, scale = 1.000000e+00 : f64} : (tensor<2x8xi64>, tensor<128x32xf32>) -> tensor<2x8x32xf32>
    %1 = "nn.rms_norm"(%0, %arg4) {eps = 1.000000e-05 : f64, head_dim = 0 : i64, nn.module = "backbone.layers.0.norm", offset = 0.000000e+00 : f64} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    %2 = "nn.mamba2_mixer"(%1, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11, %arg12, %arg2) {chunk_size = 8 : i64, conv_kernel = 4 : i64, dt_min = 6.000000e-01 : f64, eps = 1.000000e-05 : f64, head_dim = 4 : i64, n_groups = 4 : i64, nn.module = "backbone.layers.0.mixer", num_heads = 8 : i64, state_size = 8 : i64} : (tensor<2x8x32xf32>, tensor<136x32xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
    %3 = "nn.add"(%0, %2) {nn.module = "backbone.layers.0"} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
    %4 = "nn.rms_norm"(%3, %arg13) {eps = 1.000000e-05 : f64, head_dim = 0 : i64, nn.module = "backbone.norm_f", offset = 0.000000e+00 : f64} : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    %5 = "nn.linear"(%4, %arg14) {nn.module = "lm_head"} : (tensor<2x8x32xf32>, tensor<128x32xf32>) -> tensor<2x8x128xf32>
    %6 = "nn.cross_entropy"(%5, %arg1) {ignore_index = -100 : i64, nn.module = "loss", shift = true} : (tensor<2x8x128xf32>, tensor<2x8xi64>) -> tensor<f32>
    return %6 : tensor<f32>
  }
}

