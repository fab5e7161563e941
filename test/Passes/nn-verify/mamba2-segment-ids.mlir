// nn.mamba2_mixer's optional operand 9, segment_ids (packed documents):
// nn-verify accepts i64 [B, S] of the input's batch and sequence and names
// the operand, the shape it has and the one expected, or its element type.
// RUN: not %shard-opt --nn-verify --split-input-file %s 2>/dev/null | FileCheck %s
// RUN: %shard-opt --nn-verify --split-input-file --verify-diagnostics %s >/dev/null
// The first error's file and column, which --verify-diagnostics leaves unchecked:
// RUN: not %shard-opt --nn-verify --split-input-file %s 2>&1 >/dev/null | FileCheck %s --check-prefix=COL

// CHECK-LABEL: func.func @ok
// CHECK: "nn.mamba2_mixer"(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8, %arg9)
// CHECK-NOT: func.func
func.func @ok(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32>, %cw: tensor<48x1x4xf32>,
              %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
              %nw: tensor<32xf32>, %out: tensor<32x32xf32>, %seg: tensor<1x8xi64>) -> tensor<1x8x32xf32> {
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out, %seg) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<1x8xi64>) -> tensor<1x8x32xf32>
  return %y : tensor<1x8x32xf32>
}

// -----

func.func @short(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32>, %cw: tensor<48x1x4xf32>,
                 %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
                 %nw: tensor<32xf32>, %out: tensor<32x32xf32>, %seg: tensor<1x7xi64>) -> tensor<1x8x32xf32> {
  // COL: mamba2-segment-ids.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.mamba2_mixer' (backbone.layers.0.mixer): segment_ids has shape [1, 7], expected [1, 8]}}
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out, %seg) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<1x7xi64>) -> tensor<1x8x32xf32>
  return %y : tensor<1x8x32xf32>
}

// -----

func.func @narrow(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32>, %cw: tensor<48x1x4xf32>,
                  %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
                  %nw: tensor<32xf32>, %out: tensor<32x32xf32>, %seg: tensor<1x8xi32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'nn.mamba2_mixer' (backbone.layers.0.mixer): segment_ids must have element type i64}}
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out, %seg) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<1x8xi32>) -> tensor<1x8x32xf32>
  return %y : tensor<1x8x32xf32>
}

// -----

func.func @flat(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32>, %cw: tensor<48x1x4xf32>,
                %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
                %nw: tensor<32xf32>, %out: tensor<32x32xf32>, %seg: tensor<8xi64>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'nn.mamba2_mixer' (backbone.layers.0.mixer): segment_ids has shape [8], expected [1, 8]}}
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out, %seg) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<8xi64>) -> tensor<1x8x32xf32>
  return %y : tensor<1x8x32xf32>
}

// -----

func.func @float_ids(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32>, %cw: tensor<48x1x4xf32>,
                     %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
                     %nw: tensor<32xf32>, %out: tensor<32x32xf32>, %seg: tensor<1x8xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'nn.mamba2_mixer' (backbone.layers.0.mixer): segment_ids must have element type i64}}
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out, %seg) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<1x8xf32>) -> tensor<1x8x32xf32>
  return %y : tensor<1x8x32xf32>
}
