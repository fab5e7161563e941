// Pass diagnostics (diagnostic.h).
#include "diagnostic.h"

#include <stdio.h>

#include "mlir-c/Diagnostics.h"
#include "nn.h"

void tp_error(MlirOperation op, const char *pass, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tp_verror(op, pass, fmt, ap);
  va_end(ap);
}

void tp_verror(MlirOperation op, const char *pass, const char *fmt, va_list ap) {
  char msg[4096]; // room for a memory report's summary
  size_t n = 0;
  if (pass)
    n += (size_t)snprintf(msg, sizeof msg, "%s: ", pass);
  MlirStringRef m = mlirOperationIsNull(op) ? (MlirStringRef){NULL, 0} : nn_module_of(op);
  if (m.length && n < sizeof msg)
    n += (size_t)snprintf(msg + n, sizeof msg - n, "'%.*s': ",
                          (int)(m.length < 256 ? m.length : 256), m.data);
  if (n < sizeof msg)
    vsnprintf(msg + n, sizeof msg - n, fmt, ap);
  mlirEmitError(mlirOperationGetLocation(op), msg);
}
