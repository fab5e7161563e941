// Diagnostics at every kind of location, printed by shard-opt as mlir-opt
// prints them (diagnostics.test).

func.func @tabs(%a: i32) {
	%0 = arith.addi %a, %b : i32
	return
}

// -----

func.func @note_elsewhere() {
  %0 = arith.constant 1 : i32
  %0 = arith.constant 2 : i32
  return
}

// -----

func.func @note_here() -> i32 {
  %0 = arith.constant 1 : i64
  return %0 : i64
}

// -----

func.func @non_ascii() -> i32 {
  %0 = arith.constant 1 : i64
  return %0 : i64 // café: a line with non-ASCII bytes gets no caret line
}

// -----

func.func @name_location() -> i32 {
  %0 = arith.constant 1 : i64
  return %0 : i64 loc("no file position")
}

// -----

func.func @fused_location() -> i32 {
  %0 = arith.constant 1 : i64
  return %0 : i64 loc(fused["first", "f.mlir":7:9])
}

// -----

func.func @end_of_line(%a: i32) {
  %0 = arith.addi %a,
