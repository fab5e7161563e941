func.func @fold() -> i32 {
  %0 = arith.constant 1 : i32
  %1 = arith.constant 2 : i32
  %2 = arith.addi %0, %1 : i32
  return %2 : i32
}

// -----

func.func private @callee(%x: i32) -> i32 {
  %0 = arith.muli %x, %x : i32
  return %0 : i32
}
func.func @caller(%x: i32) -> i32 {
  %0 = func.call @callee(%x) : (i32) -> i32
  return %0 : i32
}
