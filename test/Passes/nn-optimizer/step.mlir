// nn-optimizer on the output of nn-autodiff: every gradient result (marked
// nn.grad_of) is handed to its parameter with nn.store_grad, in result
// order; one nn.optimizer_step on the loss carries the step's options; the
// function then returns the loss only.
// RUN: %shard-opt --nn-optimizer %s | FileCheck %s
// RUN: %shard-opt --pass-pipeline='builtin.module(nn-optimizer{lr=3e-4 betas=0.8,0.95 eps=1e-6 weight-decay=0 max-grad-norm=0 norm-type=inf})' %s | FileCheck %s --check-prefix=OPTS

// CHECK-LABEL: func.func @step(
// CHECK-SAME: -> tensor<f32>
// CHECK: %[[LOSS:.*]] = "nn.cross_entropy"
// CHECK: "nn.store_grad"(%[[GW:.*]]) {nn.grad_of = "w", nn.module = "optimizer"} : (tensor<6x4xf32>) -> ()
// CHECK-NEXT: "nn.store_grad"(%[[GB:.*]]) {nn.grad_of = "b", nn.module = "optimizer"} : (tensor<6xf32>) -> ()
// The defaults: torch.optim.AdamW's, and NeMo-RL's clip at 1.0 (L2).
// CHECK-NEXT: "nn.optimizer_step"(%[[LOSS]]) {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, max_grad_norm = 1.000000e+00 : f64, nn.module = "optimizer", norm_type = 2.000000e+00 : f64, weight_decay = 1.000000e-02 : f64} : (tensor<f32>) -> ()
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// OPTS-LABEL: func.func @step(
// OPTS: "nn.optimizer_step"({{.*}}) {beta1 = 8.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 9.9999999999999995E-7 : f64, lr = 3.000000e-04 : f64, max_grad_norm = 0.000000e+00 : f64, nn.module = "optimizer", norm_type = 0x7FF0000000000000 : f64, weight_decay = 0.000000e+00 : f64}
func.func @step(%x: tensor<2x4x4xf32>, %labels: tensor<2x4xi64>, %w: tensor<6x4xf32> {nn.param = "w"}, %b: tensor<6xf32> {nn.param = "b"})
    -> (tensor<f32>, tensor<6x4xf32> {nn.grad_of = "w"}, tensor<6xf32> {nn.grad_of = "b"}) {
  %0 = "nn.linear"(%x, %w, %b) {nn.module = "lm_head"} : (tensor<2x4x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %1 = "nn.cross_entropy"(%0, %labels) {ignore_index = -100 : i64, nn.module = "loss", shift = true} : (tensor<2x4x6xf32>, tensor<2x4xi64>) -> tensor<f32>
  %2 = "nn.cross_entropy_grad"(%0, %labels) {ignore_index = -100 : i64, nn.module = "loss", shift = true} : (tensor<2x4x6xf32>, tensor<2x4xi64>) -> tensor<2x4x6xf32>
  %3 = "nn.linear_grad_weight"(%2, %x, %w) {nn.module = "lm_head"} : (tensor<2x4x6xf32>, tensor<2x4x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %4 = "nn.linear_grad_bias"(%2) {nn.module = "lm_head"} : (tensor<2x4x6xf32>) -> tensor<6xf32>
  return %1, %3, %4 : tensor<f32>, tensor<6x4xf32>, tensor<6xf32>
}

