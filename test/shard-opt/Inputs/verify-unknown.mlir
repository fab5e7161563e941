// expected-error @unknown {{nothing at an unknown location}}
func.func @f() {
  return
}
