// Our passes and upstream ones mix in one pipeline, at any nesting; pass
// flags run in order; IR printing shows each pass.

// RUN: %shard-opt --pass-pipeline='builtin.module(func.func(nn-verify, canonicalize), cse, nn-verify)' %s | FileCheck %s
// RUN: %shard-opt --nn-verify --canonicalize --cse %s | FileCheck %s
// RUN: %shard-opt --pass-pipeline='builtin.module(func.func(nn-verify))' --mlir-print-ir-after-all %s 2>&1 >/dev/null | FileCheck %s --check-prefix=PRINT
// RUN: %shard-opt --pass-pipeline='builtin.module(func.func(canonicalize))' --mlir-print-op-generic %s | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @f
// CHECK: "nn.relu2"
// PRINT: // -----// IR Dump After nn-verify
// GENERIC: "func.func"()

// RUN: not %shard-opt --pass-pipeline='func.func(nn-verify)' %s 2>&1 | FileCheck %s --check-prefix=ANCHOR
// ANCHOR: shard-opt: invalid --pass-pipeline: the pipeline must be anchored on the module: 'builtin.module(...)', got 'func.func(nn-verify)'

// RUN: not %shard-opt --pass-pipeline='builtin.module(func.func(nn-verify)' %s 2>&1 | FileCheck %s --check-prefix=UNBALANCED
// UNBALANCED: shard-opt: invalid --pass-pipeline: {{.*}}

// RUN: not %shard-opt --pass-pipeline='builtin.module(no-such-pass)' %s 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: shard-opt: invalid --pass-pipeline: {{.*}}'no-such-pass' does not refer to a registered pass or pass pipeline

// RUN: not %shard-opt --pass-pipeline='builtin.module(nn-verify{x=1})' %s 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: shard-opt: invalid --pass-pipeline: pass 'nn-verify' has no option 'x'

func.func @f(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = "nn.relu2"(%x) {nn.module = "mixer"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// Our module-level passes cannot be nested under another op (MLIR would abort).
// RUN: not %shard-opt --pass-pipeline='builtin.module(func.func(tp-plan{plan=qwen2}))' %s 2>&1 | FileCheck %s --check-prefix=NESTED
// NESTED: shard-opt: invalid --pass-pipeline: pass 'tp-plan' runs on 'builtin.module', not nested in 'func.func(...)'
// RUN: not %shard-opt --pass-pipeline='builtin.module((nn-verify))' %s 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: shard-opt: invalid --pass-pipeline: expected an op name before '(' in '(nn-verify)'
