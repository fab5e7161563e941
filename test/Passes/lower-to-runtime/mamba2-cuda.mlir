// The Mamba2 mixer has no CUDA kernel yet: lower-to-runtime refuses it for
// backend=cuda at the op, naming its module, before any step is built.
// RUN: %shard-opt --verify-diagnostics --pass-pipeline='builtin.module(lower-to-runtime{backend=cuda})' %s
// What --verify-diagnostics leaves unchecked: the failing exit status, the
// file and the error's column (COL).
// RUN: not %shard-opt --pass-pipeline='builtin.module(lower-to-runtime{backend=cuda})' %s 2>&1 | FileCheck %s --check-prefix=COL

module {
  shard.grid @mesh(shape = 1x1)
  func.func @mamba(%ids: tensor<1x8xi64>, %labels: tensor<1x8xi64>, %x: tensor<1x8x32xf32> {nn.init = "normal", nn.param = "x"}, %in: tensor<84x32xf32> {nn.init = "normal", nn.param = "in.weight"}, %cw: tensor<48x1x4xf32> {nn.init = "normal", nn.param = "cw"},
                   %cb: tensor<48xf32> {nn.init = "normal", nn.param = "cb"}, %dt: tensor<4xf32> {nn.init = "dt_bias", nn.param = "dt"}, %a: tensor<4xf32> {nn.init = "a_log", nn.param = "a"}, %d: tensor<4xf32> {nn.init = "ones", nn.param = "d"},
                   %nw: tensor<32xf32> {nn.init = "normal", nn.param = "nw"}, %out: tensor<32x32xf32> {nn.init = "normal", nn.param = "out"}) -> tensor<1x8x32xf32> {
    // COL: mamba2-cuda.mlir:[[@LINE+2]]:10: error:
    // expected-error @+1 {{lower-to-runtime: 'backbone.layers.0.mixer': 'nn.mamba2_mixer' has no CUDA kernel yet: compile NemotronH for the cpu backend (shard-compile --backend=cpu)}}
    %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
    return %y : tensor<1x8x32xf32>
  }
}
