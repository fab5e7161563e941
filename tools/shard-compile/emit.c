// LLVM IR translation, object emission (LLVM-C target machine for the host)
// and linking with the runtime.
#include "emit.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "link_config.h"
#include "llvm-c/Analysis.h"
#include "llvm-c/Core.h"
#include "llvm-c/Target.h"
#include "llvm-c/TargetMachine.h"
#include "mlir-c/RegisterEverything.h"
#include "mlir-c/Target/LLVMIR.h"

extern char **environ;

bool shard_emit(MlirOperation module, const char *path, bool as_ir, char *err,
                size_t errlen) {
  MlirContext ctx = mlirOperationGetContext(module);
  mlirRegisterAllLLVMTranslations(ctx);
  LLVMContextRef llvm = LLVMContextCreate();
  LLVMModuleRef m = mlirTranslateModuleToLLVMIR(module, llvm);
  bool ok = m != NULL;
  if (!ok)
    snprintf(err, errlen, "translation of the lowered module to LLVM IR failed");
  char *message = NULL;
  if (ok && LLVMVerifyModule(m, LLVMReturnStatusAction, &message)) {
    snprintf(err, errlen, "the generated LLVM IR is invalid: %s", message);
    ok = false;
  }
  LLVMDisposeMessage(message);
  message = NULL;
  if (ok && as_ir) {
    if (LLVMPrintModuleToFile(m, path, &message)) {
      snprintf(err, errlen, "cannot write '%s': %s", path, message);
      ok = false;
    }
  } else if (ok) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    char *triple = LLVMGetDefaultTargetTriple();
    LLVMTargetRef target;
    if (LLVMGetTargetFromTriple(triple, &target, &message)) {
      snprintf(err, errlen, "no LLVM target for '%s': %s", triple, message);
      ok = false;
    } else {
      // Generic CPU: the step is calls into the runtime, which is where the
      // time goes; the object stays portable across machines.
      LLVMTargetMachineRef tm = LLVMCreateTargetMachine(
          target, triple, "generic", "", LLVMCodeGenLevelDefault, LLVMRelocPIC,
          LLVMCodeModelDefault);
      LLVMSetTarget(m, triple);
      LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
      char *dl = LLVMCopyStringRepOfTargetData(layout);
      LLVMSetDataLayout(m, dl);
      LLVMDisposeMessage(dl);
      LLVMDisposeTargetData(layout);
      if (LLVMTargetMachineEmitToFile(tm, m, path, LLVMObjectFile, &message)) {
        snprintf(err, errlen, "cannot emit '%s': %s", path, message);
        ok = false;
      }
      LLVMDisposeTargetMachine(tm);
    }
    LLVMDisposeMessage(triple);
  }
  LLVMDisposeMessage(message);
  if (m)
    LLVMDisposeModule(m);
  LLVMContextDispose(llvm);
  return ok;
}

bool shard_link_has_cuda(void) { return kCudaLinkArgs[0] != NULL; }

bool shard_link(const char *object, const char *output, const char *name, bool cuda,
                bool serial, char *err, size_t errlen) {
  const char *const *libs = cuda ? (serial ? kCudaSerialLinkArgs : kCudaLinkArgs)
                                 : (serial ? kSerialLinkArgs : kLinkArgs);
  size_t nlibs = 0;
  while (libs[nlibs])
    ++nlibs;
  const char **argv = calloc(nlibs + 8, sizeof *argv);
  size_t n = 0;
  argv[n++] = SHARD_LINKER;
  argv[n++] = "-o";
  argv[n++] = output;
  argv[n++] = object;
  for (size_t i = 0; i < nlibs; ++i)
    argv[n++] = libs[i];
  argv[n++] = "-lm";
  argv[n] = NULL;
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *)argv, environ);
  free(argv);
  if (rc != 0) {
    snprintf(err, errlen, "cannot run the linker '%s': %s", SHARD_LINKER, strerror(rc));
    return false;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    snprintf(err, errlen, "linking '%s' failed (the linker's messages are above)", name);
    return false;
  }
  return true;
}
