// From the lowered (LLVM-dialect) module to an object file and a linked
// training executable, through MLIR's LLVM IR translation and LLVM-C.
#ifndef SHARD_COMPILE_EMIT_H
#define SHARD_COMPILE_EMIT_H

#include <stdbool.h>
#include <stddef.h>

#include "mlir-c/IR.h"

/// Translates `module` (LLVM dialect) to LLVM IR and writes it as textual
/// IR (`as_ir`) or a native object file for the host to `path`. On failure
/// writes a message to err and returns false.
bool shard_emit(MlirOperation module, const char *path, bool as_ir, char *err,
                size_t errlen);

/// Links `object` with the runtime and its training driver into the
/// executable `output` (the C compiler as linker, arguments from
/// link_config.h); with `cuda`, with libshardrt_cuda and the CUDA libraries
/// too (the object was lowered with lower-to-runtime{backend=cuda}). With
/// `serial` (a program of one rank: dp x tp = 1) the serial runtime
/// (libshardrt_serial, runtime/mpi_serial): the executable needs no MPI
/// library or launcher. Returns false with err set, naming `name` (the path
/// the user gave, of which `output` may be the temporary), if the linker
/// fails.
bool shard_link(const char *object, const char *output, const char *name, bool cuda,
                bool serial, char *err, size_t errlen);

/// Whether this build has the CUDA runtime to link --backend=cuda programs.
bool shard_link_has_cuda(void);

#endif // SHARD_COMPILE_EMIT_H
