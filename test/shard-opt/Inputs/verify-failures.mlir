// Each chunk fails --verify-diagnostics once (verify-diagnostics-failures.test).

// An expectation that nothing produces.
func.func @missing() {
  // expected-error @+1 {{this error never comes}}
  return
}

// -----

// A diagnostic that nothing expects.
func.func @unexpected(%a: i32) {
  %0 = arith.addi %a, %b : i32
  return
}

// -----

// A regex that does not match the message.
func.func @wrong_regex(%a: i32) {
  // expected-error-re @+1 {{use of undeclared SSA value {{[0-9]+}}}}
  %0 = arith.addi %a, %b : i32
  return
}

// -----

// The right message on the wrong line.
func.func @wrong_line(%a: i32) {
  // expected-error @+2 {{use of undeclared SSA value name}}
  %0 = arith.addi %a, %b : i32
  return
}

// -----

// The right message and line, the wrong kind: a near miss.
func.func @near_miss(%a: i32) {
  // expected-warning @+1 {{use of undeclared SSA value name}}
  %0 = arith.addi %a, %b : i32
  return
}

// -----

// A note nothing expects, with its error expected.
func.func @unexpected_note() {
  %0 = arith.constant 1 : i32
  // expected-error @+1 {{redefinition of SSA value '%0'}}
  %0 = arith.constant 2 : i32
  return
}

// -----

// Malformed -re expectations: reported before anything runs, and dropped.
// expected-error-re {{unbalanced {{a(b}}}}
// expected-error-re {{unclosed {{[0-9]+}}
func.func @malformed() {
  return
}
