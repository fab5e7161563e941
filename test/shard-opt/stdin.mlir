// Input from stdin ("-" or no file), output to -o.
// RUN: cat %S/Inputs/valid.mlir | %shard-opt | FileCheck %s
// RUN: cat %S/Inputs/valid.mlir | %shard-opt - -o %t && FileCheck %s < %t
// CHECK: "nn.relu2"(%arg0) {nn.module = "mixer"}
