// The cuda backend fuses an nn.add of two bf16 activations with the
// nn.rms_norm of its result into one srt_op_add_rms_norm; an add of a bf16
// activation and an fp32 value (here the rotary table) is not fused, and is
// refused like any mixed-dtype add (it once took the fused path and read
// the fp32 buffer as bf16).
// RUN: %shard-opt --verify-diagnostics --pass-pipeline='builtin.module(lower-to-runtime{backend=cuda})' %s
// What --verify-diagnostics leaves unchecked: the failing exit status, the
// file and the error's column (COL).
// RUN: not %shard-opt --pass-pipeline='builtin.module(lower-to-runtime{backend=cuda})' %s 2>&1 | FileCheck %s --check-prefix=COL
module {
  shard.grid @mesh(shape = 1x1)
  func.func @step(%ids: tensor<1x4xi64>, %labels: tensor<1x4xi64>, %emb: tensor<16x8xf32> {nn.init = "normal", nn.param = "e"}, %nw: tensor<8xf32> {nn.init = "normal", nn.param = "n"}) -> tensor<1x4x8xf32> {
    %c, %s = "nn.rotary_embedding"() {nn.module = "rope", head_dim = 8 : i64, theta = 10000.0 : f64, rope_type = "default"} : () -> (tensor<1x4x8xf32>, tensor<1x4x8xf32>)
    %0 = "nn.embedding"(%ids, %emb) {padding_idx = -1 : i64, nn.module = "embed", scale = 1.0 : f64} : (tensor<1x4xi64>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
    // COL: fusion.mlir:[[@LINE+2]]:10: error:
    // expected-error @+1 {{lower-to-runtime: 'res': nn.add of a bf16 activation and an fp32 gradient (no mixed-dtype add)}}
    %1 = "nn.add"(%0, %c) {nn.module = "res"} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    %2 = "nn.rms_norm"(%1, %nw) {nn.module = "norm", eps = 1.0e-6 : f64, offset = 0.0 : f64, head_dim = 0 : i64} : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
    return %2 : tensor<1x4x8xf32>
  }
}
