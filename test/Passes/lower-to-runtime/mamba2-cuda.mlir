// The Mamba2 mixer on backend=cuda: lowered to its runtime op like any
// other (runtime/cuda/ops_mamba2.c); under context parallelism (cp_size >
// 1), which its cuda kernels have no form for, lower-to-runtime refuses it
// at the op, naming its module, before any step is built.
// RUN: %shard-import %S/../../e2e/configs/tiny-nemotron_h.json --batch 2 --seq 8 | %shard-opt --pass-pipeline='builtin.module(nn-autodiff, nn-optimizer, tp-plan{plan=nemotron_h tp=1}, tp-partition, lower-to-runtime{backend=cuda})' | FileCheck %s
// RUN: sed 's/chunk_size = 128 : i64,/chunk_size = 128 : i64, cp_size = 2 : i64,/' %s > %t.cp.mlir
// RUN: not %shard-opt --pass-pipeline='builtin.module(lower-to-runtime{backend=cuda})' %t.cp.mlir 2>&1 | FileCheck %s --check-prefix=CP

// The memory report counts the cuda mixer's device scratch
// (srt_cuda_mamba2_scratch_parts), the step's largest: tiny-nemotron_h at
// 2 x 8 tokens (heads 8 x head_dim 4, groups 4 x state 8, conv_kernel 4:
// inner 32, conv_dim 96, proj 136, n 16), its backward's parts in floats,
// each rounded up to 64: 384 + 128 + 3 x 64 + 64 (weights), 2176 (proj) +
// 1536 (xbc) + 128 (dt) + 512 (y) + 64 (rstd) + 256 (normed), 512 + 512
// (dnormed, dy) + 2176 (dproj) + 1536 (dxbc) + 128 (ddt) + 1152 (scan: 8 x
// 8 x 17 + 2 x 2 x 8) + 1088 (dproj bf16) = 12544 floats = 50176 bytes.
// RUN: %shard-compile %S/../../e2e/configs/tiny-nemotron_h.json --tp-plan=nemotron_h --tp-size=1 --batch 2 --seq 8 --backend=cuda --emit=llvm --memory-report=%t.json -o %t.ll 2>&1 | FileCheck %s --check-prefix=SCRATCH
// SCRATCH: ops' scratch (largest known) 50176 bytes
// CHECK: llvm.call @srt_op_mamba2_mixer(
// CHECK: llvm.call @srt_op_mamba2_mixer_grad(
// CHECK: @srt_cuda_backend
// CP: error: lower-to-runtime: 'backbone.layers.0.mixer': 'nn.mamba2_mixer' has no CUDA kernel under context parallelism (cp=2) yet: compile NemotronH with cp 1 on cuda, or for the cpu backend (shard-compile --backend=cpu)

module {
  shard.grid @mesh(shape = 1x1)
  func.func @mamba(%ids: tensor<1x8xi64>, %labels: tensor<1x8xi64>, %x: tensor<1x8x32xf32> {nn.init = "normal", nn.param = "x"}, %in: tensor<84x32xf32> {nn.init = "normal", nn.param = "in.weight"}, %cw: tensor<48x1x4xf32> {nn.init = "normal", nn.param = "cw"},
                   %cb: tensor<48xf32> {nn.init = "normal", nn.param = "cb"}, %dt: tensor<4xf32> {nn.init = "dt_bias", nn.param = "dt"}, %a: tensor<4xf32> {nn.init = "a_log", nn.param = "a"}, %d: tensor<4xf32> {nn.init = "ones", nn.param = "d"},
                   %nw: tensor<32xf32> {nn.init = "normal", nn.param = "nw"}, %out: tensor<32x32xf32> {nn.init = "normal", nn.param = "out"}) -> tensor<1x8x32xf32> {
    %y = "nn.mamba2_mixer"(%x, %in, %cw, %cb, %dt, %a, %d, %nw, %out) {nn.module = "backbone.layers.0.mixer", num_heads = 4 : i64, head_dim = 8 : i64, n_groups = 2 : i64, state_size = 4 : i64, conv_kernel = 4 : i64, chunk_size = 128 : i64, eps = 1.0e-5 : f64, dt_min = 1.0e-3 : f64} : (tensor<1x8x32xf32>, tensor<84x32xf32>, tensor<48x1x4xf32>, tensor<48xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
    return %y : tensor<1x8x32xf32>
  }
}
