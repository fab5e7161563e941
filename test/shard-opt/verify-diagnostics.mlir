// --verify-diagnostics: each form of expectation, checked alike by mlir-opt
// 22 (the reference) and shard-opt. Every diagnostic below is expected, so
// both exit 0 and print the IR of the chunks that have no error.
// RUN: %shard-opt --split-input-file --verify-diagnostics %s | FileCheck %s
// RUN: %mlir-opt --split-input-file --verify-diagnostics %s | FileCheck %s
// The same with one dash, as upstream RUN lines spell it, byte for byte.
// RUN: %shard-opt -split-input-file -verify-diagnostics %s > %t.ours
// RUN: %mlir-opt -split-input-file -verify-diagnostics %s > %t.ref
// RUN: diff %t.ours %t.ref

// @+N: N lines below.
func.func @plus(%a: i32) {
  // expected-error @+1 {{use of undeclared SSA value name}}
  %0 = arith.addi %a, %b : i32
  return
}

// -----

// No offset: the comment's own line; @below: the next line that holds no
// expectation; a note is checked like an error.
func.func @redefined() {
  // expected-note @below {{previously defined here}}
  %0 = arith.constant 1 : i32
  %0 = arith.constant 2 : i32 // expected-error {{redefinition of SSA value '%0'}}
  return
}

// -----

// @above: the last line above that holds no expectation.
func.func @above(%a: i32) {
  %0 = arith.addi %a, %c : i32
  // expected-error @above {{use of undeclared}}
  return
}

// -----

// @-N: N lines above.
func.func @minus(%a: i32) {
  %0 = arith.addi %a, %d : i32
  // (a line between)
  // expected-error @-2 {{SSA value name}}
  return
}

// -----

// -re: the {{...}} parts are regular expressions, the rest literal text
// (its parentheses and dots match themselves).
func.func @regex() -> i32 {
  %0 = arith.constant 1 : i64
  // expected-error-re @+1 {{type of return operand 0 ('i{{[0-9]+}}') doesn't match function result type ('i{{(32|64)}}')}}
  return %0 : i64
}

// -----

// @unknown: a diagnostic at a location with no file position.
// expected-error @unknown {{type of return operand 0 ('i64') doesn't match}}
func.func @unknown() -> i32 {
  %0 = arith.constant 1 : i64
  return %0 : i64 loc(unknown)
}

// -----

// A chunk without diagnostics is printed.
// CHECK: func.func @clean
func.func @clean() {
  return
}
