// nn.mamba2_mixer: nn-verify accepts NemotronH's shapes (hidden 32, 4 heads
// of 8, 2 groups, state 4, kernel 4: conv channels 32 + 2*2*4 = 48, in_proj
// rows 32 + 48 + 4 = 84) and names the operand and the expected shape when
// one is wrong, and refuses a negative or missing dt_min.
// RUN: not %shard-opt --nn-verify --split-input-file %s 2>/dev/null | FileCheck %s
// RUN: %shard-opt --nn-verify --split-input-file --verify-diagnostics %s >/dev/null
// The first error's file and column, which --verify-diagnostics leaves unchecked:
// RUN: not %shard-opt --nn-verify --split-input-file %s 2>&1 >/dev/null | FileCheck %s --check-prefix=COL

// CHECK-LABEL: func.func @ok
// CHECK: "nn.mamba2_mixer"
// CHECK-NOT: func.func
func.func @ok(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32>, %cw: tensor<48x1x4xf32>,
              %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
              %nw: tensor<32xf32>, %out: tensor<32x32xf32>) -> tensor<1x8x32xf32> {
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
  return %y : tensor<1x8x32xf32>
}

// -----

func.func @bad_conv(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32>, %cw: tensor<48x1x3xf32>,
                    %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
                    %nw: tensor<32xf32>, %out: tensor<32x32xf32>) -> tensor<1x8x32xf32> {
  // COL: mamba2-verify.mlir:[[@LINE+2]]:8: error:
  // expected-error @+1 {{'nn.mamba2_mixer' (backbone.layers.0.mixer): conv1d_weight has shape [48, 1, 3], expected [48, 1, 4]}}
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x3xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
  return %y : tensor<1x8x32xf32>
}

// -----

func.func @bad_in_proj(%x: tensor<1x8x32xf32>, %in: tensor<80x32xf32>, %cw: tensor<48x1x4xf32>,
                       %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
                       %nw: tensor<32xf32>, %out: tensor<32x32xf32>) -> (tensor<1x8x32xf32>, tensor<1x8x32xf32>) {
  // expected-error @+1 {{'nn.mamba2_mixer' (backbone.layers.0.mixer): in_proj_weight has shape [80, 32], expected [84, 32]}}
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<80x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
  // expected-error @+1 {{'nn.mamba2_mixer' (backbone.layers.0.mixer): num_heads 4 is not divisible by n_groups 3}}
  %z = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 3 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<80x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
  return %y, %z : tensor<1x8x32xf32>, tensor<1x8x32xf32>
}

// -----

func.func @bad_dt_min(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32>, %cw: tensor<48x1x4xf32>,
                      %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
                      %nw: tensor<32xf32>, %out: tensor<32x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'nn.mamba2_mixer' (backbone.layers.0.mixer): attribute 'dt_min' (time_step_min, dt's lower clamp) must be finite and >= 0, got -0.5}}
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = -0.5 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
  return %y : tensor<1x8x32xf32>
}

// -----

func.func @no_dt_min(%x: tensor<1x8x32xf32>, %in: tensor<84x32xf32>, %cw: tensor<48x1x4xf32>,
                     %cb: tensor<48xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>,
                     %nw: tensor<32xf32>, %out: tensor<32x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+1 {{'nn.mamba2_mixer' op attribute "dt_min" is expected but not provided}}
  %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
  return %y : tensor<1x8x32xf32>
}
