// The one error formatter of our passes: "<pass>: '<nn.module>': <message>"
// emitted as an MLIR diagnostic at the op's location (the config key or IR
// line it came from), so every pass names the Hugging Face module the same
// way.
#ifndef SHARD_PASSES_DIAGNOSTIC_H
#define SHARD_PASSES_DIAGNOSTIC_H

#include <stdarg.h>

#include "mlir-c/IR.h"

/// Emits an error at `op`'s location: `pass` (e.g. "lower-to-runtime"; NULL
/// for none), then the op's nn.module when it has one, then the printf
/// message. Messages longer than 1 KiB are cut.
__attribute__((format(printf, 3, 4))) void tp_error(MlirOperation op, const char *pass,
                                                    const char *fmt, ...);

/// tp_error with the message's arguments as a va_list (for passes' own
/// printf-like reporters).
__attribute__((format(printf, 3, 0))) void tp_verror(MlirOperation op, const char *pass,
                                                     const char *fmt, va_list ap);

#endif // SHARD_PASSES_DIAGNOSTIC_H
