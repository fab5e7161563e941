// lower-to-runtime on a small partitioned step (embedding -> lm_head ->
// loss, its backward, the optimizer hand-off), translated to LLVM IR to
// read the calls. The memory plan, worked by hand: input_ids and labels
// (64 bytes each) at 0 and 64; each parameter [16, 8] (512 bytes) takes
// value, gradient and two moments: embed_tokens at 128/640/1152/1664,
// lm_head at 2176/2688/3200/3712, so the persistent region ends at 4224.
// Temporaries by liveness, first fit from 4224: the embedding output
// (256 B, live to op 5) 4224; the logits (512 B, to op 3) 4480; the loss
// (64 B, to the end) 4992; dlogits (512 B, ops 3-5) in place of the logits
// (the loss gradient is their last reader), 4480; d(embedding output)
// (256 B, ops 4-6) after the loss, 5056; the two parameter gradients are
// computed into their slots (640, 2688). Arena: 5056 + 256 = 5312.

// RUN: %shard-opt --pass-pipeline='builtin.module(lower-to-runtime)' %s | %mlir-translate --mlir-to-llvmir | FileCheck %s
// RUN: %shard-opt --pass-pipeline='builtin.module(lower-to-runtime{backend=cuda})' %s | %mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=CUDA
// RUN: %shard-opt --pass-pipeline='builtin.module(lower-to-runtime{keep-logits=true})' %s | %mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=KEEP
// RUN: %shard-opt --pass-pipeline='builtin.module(lower-to-runtime{backend=cuda cpu-offload=true})' %s | %mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=OFFLOAD

// The program table: ABI, model, mesh 1x1, batch 2, seq 4, local batch 2,
// vocabulary 16, init std, arena 5312, persistent 4224, no host-only prefix
// (cpu-offload), ids 0, labels 64,
// 2 parameters, no logits kept, the cpu backend (srt_cpu_backend, which
// libshardrt defines).
// CHECK: @param_name_0 = private constant [26 x i8] c"model.embed_tokens.weight\00"
// CHECK: @param_name_1 = private constant [15 x i8] c"lm_head.weight\00"
// CHECK: @model_path = private constant [10 x i8] c"tiny.json\00"
// CHECK: @params = private constant {{.*}} { ptr @param_name_0, i32 0, i32 2, [8 x i64] [i64 16, i64 8, {{.*}}], [8 x i64] [i64 16, i64 8, {{.*}}], [2 x { i32, i32 }] zeroinitializer, i64 128, i64 640, i64 1152, i64 1664, i64 -1, i64 -1, i32 0, [5 x i64] zeroinitializer }, {{.*}} { ptr @param_name_1, i32 0, i32 2, {{.*}}, i64 2176, i64 2688, i64 3200, i64 3712, i64 -1, i64 -1, i32 0, [5 x i64] zeroinitializer }]
// CHECK: @shard_program = constant {{.*}} { i32 {{[0-9]+}}, ptr @model_path, ptr @config_json, ptr @checkpoint_names, ptr @tokenizer_json, i64 1, i64 1, i64 1, i64 2, i64 4, i64 2, i32 1, i64 16, double 2.000000e-02, double 1.234500e+03, i64 5312, i64 4224, i64 0, i64 0, i64 64, i64 -1, i64 -1, i32 2, ptr @params, ptr @shard_step, i32 0, i64 -1, [3 x i64] zeroinitializer, [2 x { i32, i32 }] zeroinitializer, ptr @srt_cpu_backend }
// CHECK: @srt_cpu_backend = external constant [1 x i8]

// One call per op, the exec first, then ops.def's arguments; every status
// is checked at once.
// CHECK-LABEL: define ptr @shard_step(ptr %0, ptr %1, ptr %2)
// CHECK: %[[S:[0-9]+]] = call ptr @srt_op_embedding(ptr %0, i64 0, i64 128, i64 4224, i64 8, i64 8, i64 16, i64 -1, double 1.000000e+00)
// CHECK-NEXT: %[[F:[0-9]+]] = icmp ne ptr %[[S]], null
// CHECK-NEXT: br i1 %[[F]], label %[[FAIL:[0-9]+]], label
// CHECK: call ptr @srt_op_linear(ptr %0, i64 4224, i64 2176, i64 -1, i64 4480, i64 8, i64 8, i64 16)
// CHECK: call ptr @srt_op_cross_entropy(ptr %0, i64 4480, i64 64, i64 4992, i64 2, i64 4, i64 16, i64 -100, i64 1)
// CHECK: call ptr @srt_op_cross_entropy_grad(ptr %0, i64 4480, i64 64, i64 4480, i64 2, i64 4, i64 16, i64 -100, i64 1)
// CHECK: call ptr @srt_op_linear_grad_input(ptr %0, i64 4480, i64 2176, i64 5056, i64 8, i64 8, i64 16)
// CHECK: call ptr @srt_op_linear_grad_weight(ptr %0, i64 4480, i64 4224, i64 2688, i64 8, i64 8, i64 16)
// CHECK: call ptr @srt_op_embedding_grad(ptr %0, i64 0, i64 5056, i64 640, i64 8, i64 8, i64 16, i64 -1, double 1.000000e+00, i64 -1)
// CHECK: call ptr @srt_op_optimizer_step(ptr %0, ptr @shard_program, ptr %1, i64 4992, ptr %2)
// CHECK: ret ptr null
// CHECK: [[FAIL]]:
// CHECK-NEXT: phi ptr
// CHECK: declare ptr @srt_op_embedding(ptr, i64, i64, i64, i64, i64, i64, i64, double)

// cuda: each parameter also gets a bf16 compute copy (256 bytes) after its
// moments, which the ops read: embed_tokens 128/640/1152/1664 + 2176,
// lm_head 2432/2944/3456/3968 + 4480; persistent 4736; activations are
// bf16 (the embedding output, 128 B, at 4736; the logits, 256 B, at
// 4864), the loss fp32.
// CUDA: @params = {{.*}} i64 128, i64 640, i64 1152, i64 1664, i64 2176, i64 -1, i32 0, [5 x i64] zeroinitializer }, {{.*}} i64 2432, i64 2944, i64 3456, i64 3968, i64 4480, i64 -1, i32 0, [5 x i64] zeroinitializer }]
// CUDA: @shard_program = constant {{.*}} i64 5312, i64 4736, i64 0, i64 0, i64 64, i64 -1, i64 -1, i32 2, ptr @params, ptr @shard_step, i32 0, i64 -1, {{.*}}, ptr @srt_cuda_backend }
// CUDA: @srt_cuda_backend = external constant [1 x i8]
// CUDA: call ptr @srt_op_embedding(ptr %0, i64 0, i64 2176, i64 4736,
// CUDA: call ptr @srt_op_linear(ptr %0, i64 4736, i64 4480, i64 -1, i64 4864,

// cpu-offload: every parameter's weights, m and v first (the host-only
// prefix: 0/512/1024 and 1536/2048/2560, offload_bytes 3072), then the
// gradients (3072, 3584), the bf16 copies (4096, 4352), input ids and
// labels (4608, 4672); the same persistent 4736 and arena 5312; the ops
// read the copy (4096) and the ids (4608).
// OFFLOAD: @params = {{.*}} i64 0, i64 3072, i64 512, i64 1024, i64 4096, i64 -1, i32 0, [5 x i64] zeroinitializer }, {{.*}} i64 1536, i64 3584, i64 2048, i64 2560, i64 4352, i64 -1, i32 0, [5 x i64] zeroinitializer }]
// OFFLOAD: @shard_program = constant {{.*}} i64 5312, i64 4736, i64 3072, i64 4608, i64 4672, i64 -1, i64 -1, i32 2, ptr @params, {{.*}}, ptr @srt_cuda_backend }
// OFFLOAD: call ptr @srt_op_embedding(ptr %0, i64 4608, i64 4096, i64 4736,

// keep-logits pins the lm_head output (4480, [2, 4, 16], Replicate) to the
// end of the step: dlogits no longer takes its place (5056, after the loss),
// and d(embedding output) goes after dlogits, 5568; the arena is 5568 + 256 = 5824.
// KEEP: @shard_program = constant {{.*}} i64 5824, i64 4224, {{.*}} ptr @shard_step, i32 1, i64 4480, [3 x i64] [i64 2, i64 4, i64 16], [2 x { i32, i32 }] zeroinitializer, ptr @srt_cpu_backend }
// KEEP: call ptr @srt_op_linear_grad_input(ptr %0, i64 5056, i64 2176, i64 5568,

module attributes {nn.config_path = "tiny.json", nn.flops_per_token = 1.234500e+03 : f64, nn.initializer_range = 2.000000e-02 : f64} {
  shard.grid @mesh(shape = 1x1)
  func.func @forward(%ids: tensor<2x4xi64>, %labels: tensor<2x4xi64>,
                     %emb: tensor<16x8xf32> {nn.init = "normal", nn.param = "model.embed_tokens.weight"},
                     %head: tensor<16x8xf32> {nn.init = "normal", nn.param = "lm_head.weight"}) -> tensor<f32> {
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
