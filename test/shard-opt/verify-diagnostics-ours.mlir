// --verify-diagnostics sees our passes' diagnostics too: their errors, and
// their warnings (which MLIR's C API cannot emit, so the passes hand them to
// the driver): a plan entry that matches no module warns at the function.
// RUN: %shard-opt --verify-diagnostics --pass-pipeline='builtin.module(tp-plan{plan=%S/../Passes/tp-plan/Inputs/extra-entry.json tp=2})' %s -o /dev/null
// Without the expectations the same warnings are printed with the line.
// RUN: %shard-opt --pass-pipeline='builtin.module(tp-plan{plan=%S/../Passes/tp-plan/Inputs/extra-entry.json tp=2})' %s -o /dev/null 2>&1 | FileCheck %s
// CHECK: verify-diagnostics-ours.mlir:[[@LINE+6]]:1: warning: tp-plan: {{.*}}extra-entry.json: plan entry 'model.layers.*.self_attn.q_proj' matches no module
// CHECK-NEXT: {{^}}func.func @forward(
// CHECK-NEXT: {{^\^$}}

// expected-warning @below {{extra-entry.json: plan entry 'model.layers.*.self_attn.q_proj' matches no module}}
// expected-warning @below {{plan entry 'model.vision_tower.*' matches no module}}
func.func @forward(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32> {nn.param = "model.layers.0.mlp.gate_proj.weight"}) -> tensor<2x8x128xf32> {
  %g = "nn.linear"(%x, %w) {nn.module = "model.layers.0.mlp.gate_proj"} : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<2x8x128xf32>
  return %g : tensor<2x8x128xf32>
}
