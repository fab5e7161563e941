// More non-blocking collectives in flight than the runtime has slots
// (SRT_MAX_PENDING = 64): 66 all-reduces started before any wait. The 65th
// and 66th start take the slots of the two oldest, which complete just
// before (their nn.wait later lowers to nothing); the other 64 complete at
// their waits. 66 starts, 66 waits, no error.
// RUN: %shard-opt --pass-pipeline='builtin.module(lower-to-runtime)' %s | %mlir-translate --mlir-to-llvmir | FileCheck %s
// RUN: %shard-opt --pass-pipeline='builtin.module(lower-to-runtime)' %s | %mlir-translate --mlir-to-llvmir | grep -c 'call ptr @srt_op_all_reduce_start(' | FileCheck %s --check-prefix=STARTS
// RUN: %shard-opt --pass-pipeline='builtin.module(lower-to-runtime)' %s | %mlir-translate --mlir-to-llvmir | grep -c 'call ptr @srt_op_collective_wait(' | FileCheck %s --check-prefix=WAITS
// STARTS: 66
// WAITS: 66

// The 64 slots are taken in order, then slot 0 completes and is taken
// again, then slot 1.
// CHECK: call ptr @srt_op_all_reduce_start(ptr %0, i64 2176, i64 {{[0-9]+}}, i64 128, i64 1, i64 0, i64 0, i64 0)
// CHECK: call ptr @srt_op_all_reduce_start({{.*}}, i64 63)
// CHECK-NOT: call ptr @srt_op_
// CHECK: call ptr @srt_op_collective_wait(ptr %0, i64 0)
// CHECK-NOT: call ptr @srt_op_
// CHECK: call ptr @srt_op_all_reduce_start({{.*}}, i64 0)
// CHECK-NOT: call ptr @srt_op_
// CHECK: call ptr @srt_op_collective_wait(ptr %0, i64 1)
// CHECK-NOT: call ptr @srt_op_
// CHECK: call ptr @srt_op_all_reduce_start({{.*}}, i64 1)
// The waits of the first two lower to nothing: the next call is slot 2's
// wait.
// CHECK-NOT: call ptr @srt_op_
// CHECK: call ptr @srt_op_collective_wait(ptr %0, i64 2)
// CHECK: call ptr @srt_op_optimizer_step(

module attributes {nn.config_path = "tiny.json", nn.initializer_range = 2.000000e-02 : f64} {
  shard.grid @mesh(shape = 1x2)
  func.func @forward(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>,
                     %emb: tensor<16x8xf32> {nn.init = "normal", nn.param = "model.embed_tokens.weight"},
                     %head: tensor<16x8xf32> {nn.init = "normal", nn.param = "lm_head.weight"}) -> tensor<f32> {
    %r0 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r1 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r2 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r3 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r4 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r5 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r6 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r7 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r8 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r9 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r10 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r11 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r12 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r13 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r14 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r15 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r16 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r17 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r18 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r19 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r20 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r21 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r22 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r23 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r24 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r25 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r26 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r27 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r28 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r29 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r30 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r31 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r32 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r33 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r34 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r35 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r36 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r37 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r38 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r39 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r40 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r41 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r42 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r43 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r44 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r45 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r46 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r47 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r48 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r49 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r50 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r51 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r52 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r53 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r54 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r55 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r56 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r57 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r58 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r59 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r60 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r61 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r62 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r63 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r64 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %r65 = shard.all_reduce %head on @mesh grid_axes = [1] {nn.module = "lm_head"} : tensor<16x8xf32> -> tensor<16x8xf32>
    %w0 = "nn.wait"(%r0) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w1 = "nn.wait"(%r1) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w2 = "nn.wait"(%r2) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w3 = "nn.wait"(%r3) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w4 = "nn.wait"(%r4) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w5 = "nn.wait"(%r5) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w6 = "nn.wait"(%r6) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w7 = "nn.wait"(%r7) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w8 = "nn.wait"(%r8) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w9 = "nn.wait"(%r9) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w10 = "nn.wait"(%r10) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w11 = "nn.wait"(%r11) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w12 = "nn.wait"(%r12) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w13 = "nn.wait"(%r13) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w14 = "nn.wait"(%r14) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w15 = "nn.wait"(%r15) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w16 = "nn.wait"(%r16) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w17 = "nn.wait"(%r17) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w18 = "nn.wait"(%r18) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w19 = "nn.wait"(%r19) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w20 = "nn.wait"(%r20) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w21 = "nn.wait"(%r21) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w22 = "nn.wait"(%r22) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w23 = "nn.wait"(%r23) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w24 = "nn.wait"(%r24) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w25 = "nn.wait"(%r25) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w26 = "nn.wait"(%r26) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w27 = "nn.wait"(%r27) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w28 = "nn.wait"(%r28) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w29 = "nn.wait"(%r29) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w30 = "nn.wait"(%r30) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w31 = "nn.wait"(%r31) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w32 = "nn.wait"(%r32) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w33 = "nn.wait"(%r33) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w34 = "nn.wait"(%r34) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w35 = "nn.wait"(%r35) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w36 = "nn.wait"(%r36) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w37 = "nn.wait"(%r37) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w38 = "nn.wait"(%r38) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w39 = "nn.wait"(%r39) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w40 = "nn.wait"(%r40) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w41 = "nn.wait"(%r41) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w42 = "nn.wait"(%r42) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w43 = "nn.wait"(%r43) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w44 = "nn.wait"(%r44) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w45 = "nn.wait"(%r45) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w46 = "nn.wait"(%r46) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w47 = "nn.wait"(%r47) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w48 = "nn.wait"(%r48) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w49 = "nn.wait"(%r49) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w50 = "nn.wait"(%r50) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w51 = "nn.wait"(%r51) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w52 = "nn.wait"(%r52) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w53 = "nn.wait"(%r53) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w54 = "nn.wait"(%r54) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w55 = "nn.wait"(%r55) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w56 = "nn.wait"(%r56) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w57 = "nn.wait"(%r57) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w58 = "nn.wait"(%r58) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w59 = "nn.wait"(%r59) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w60 = "nn.wait"(%r60) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w61 = "nn.wait"(%r61) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w62 = "nn.wait"(%r62) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w63 = "nn.wait"(%r63) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w64 = "nn.wait"(%r64) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %w65 = "nn.wait"(%r65) : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %0 = "nn.embedding"(%ids, %emb) {padding_idx = -1 : i64, nn.module = "model.embed_tokens", scale = 1.0 : f64} : (tensor<2x4xi64>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %1 = "nn.linear"(%0, %head) {nn.module = "lm_head"} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %2 = "nn.cross_entropy"(%1, %labels) {ignore_index = -100 : i64, nn.module = "loss", shift = true} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
    %3 = "nn.cross_entropy_grad"(%1, %labels) {ignore_index = -100 : i64, nn.module = "loss", shift = true} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
    %4 = "nn.linear_grad_input"(%3, %head) {nn.module = "lm_head"} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %5 = "nn.linear_grad_weight"(%3, %0, %head) {nn.module = "lm_head"} : (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    %6 = "nn.embedding_grad"(%ids, %4, %emb) {padding_idx = -1 : i64, nn.module = "model.embed_tokens", scale = 1.0 : f64} : (tensor<2x4xi64>, tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
    "nn.store_grad"(%6) {nn.grad_of = "model.embed_tokens.weight", nn.module = "optimizer"} : (tensor<16x8xf32>) -> ()
    "nn.store_grad"(%5) {nn.grad_of = "lm_head.weight", nn.module = "optimizer"} : (tensor<16x8xf32>) -> ()
    "nn.optimizer_step"(%2) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, max_grad_norm = 1.0 : f64, nn.module = "optimizer", norm_type = 2.0 : f64, weight_decay = 1.0e-02 : f64} : (tensor<f32>) -> ()
    return %2 : tensor<f32>
  }
}
