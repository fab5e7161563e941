// The program table's LLVM types (passes/program_table.c) against the C
// structs the training driver reads (runtime/include/shardrt/program.h):
// the same number of fields, the same size and every field at the same
// offset, under the host target's data layout. Both sides come from one
// field list, so a field added to one and not the other, or a kind mapped
// to the wrong LLVM type, fails here rather than in a training run.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "llvm-c/Core.h"
#include "llvm-c/Target.h"
#include "llvm-c/TargetMachine.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/LLVM.h"
#include "mlir-c/RegisterEverything.h"
#include "mlir-c/Target/LLVMIR.h"
#include "nn.h"
#include "program_table.h"
#include "shardrt/program.h"

typedef struct layout {
  LLVMContextRef llvm;
  LLVMModuleRef module;
  LLVMTargetMachineRef machine;
  LLVMTargetDataRef data;
} layout;

// Translates a module declaring @param_info and @program (external globals
// of the two table types) and opens the host's data layout.
static void translate(layout *l) {
  MlirContext ctx = nn_context_create();
  mlirContextGetOrLoadDialect(ctx, mlirStringRefCreateFromCString("llvm"));
  mlirRegisterAllLLVMTranslations(ctx);
  MlirLocation loc = mlirLocationUnknownGet(ctx);
  MlirModule m = mlirModuleCreateEmpty(loc);
  lb_builder b = lb_create(ctx, mlirModuleGetBody(m), loc);
  lb_global(&b, "param_info", tp_param_info_type(&b), true, NULL);
  lb_global(&b, "program", tp_program_type(&b), true, NULL);
  l->llvm = LLVMContextCreate();
  l->module = mlirTranslateModuleToLLVMIR(mlirModuleGetOperation(m), l->llvm);
  assert_non_null(l->module);
  mlirModuleDestroy(m);
  mlirContextDestroy(ctx);
  LLVMInitializeNativeTarget();
  char *triple = LLVMGetDefaultTargetTriple(), *message = NULL;
  LLVMTargetRef target;
  assert_int_equal(LLVMGetTargetFromTriple(triple, &target, &message), 0);
  l->machine = LLVMCreateTargetMachine(target, triple, "generic", "", LLVMCodeGenLevelDefault,
                                       LLVMRelocPIC, LLVMCodeModelDefault);
  l->data = LLVMCreateTargetDataLayout(l->machine);
  LLVMDisposeMessage(triple);
}

static void dispose(layout *l) {
  LLVMDisposeTargetData(l->data);
  LLVMDisposeTargetMachine(l->machine);
  LLVMDisposeModule(l->module);
  LLVMContextDispose(l->llvm);
}

static LLVMTypeRef type_of(layout *l, const char *global) {
  LLVMValueRef g = LLVMGetNamedGlobal(l->module, global);
  assert_non_null(g);
  return LLVMGlobalGetValueType(g);
}

// Field offsets of the C structs, in field-list order.
#define OFFSET(kind, name) offsetof(STRUCT, name),
#define ARRAY_OFFSET(kind, name, n) offsetof(STRUCT, name),

static void check(layout *l, LLVMTypeRef t, size_t c_size, const size_t *offsets,
                  unsigned n) {
  assert_int_equal(LLVMCountStructElementTypes(t), n);
  assert_int_equal(LLVMABISizeOfType(l->data, t), c_size);
  for (unsigned i = 0; i < n; ++i)
    assert_int_equal(LLVMOffsetOfElement(l->data, t, i), offsets[i]);
}

static void test_param_info_layout(void **state) {
  (void)state;
  layout l;
  translate(&l);
#define STRUCT srt_param_info
  static const size_t offsets[] = {SRT_PARAM_INFO_FIELDS(OFFSET, ARRAY_OFFSET)};
#undef STRUCT
  check(&l, type_of(&l, "param_info"), sizeof(srt_param_info), offsets,
        sizeof offsets / sizeof *offsets);
  dispose(&l);
}

static void test_program_layout(void **state) {
  (void)state;
  layout l;
  translate(&l);
#define STRUCT srt_program
  static const size_t offsets[] = {SRT_PROGRAM_FIELDS(OFFSET, ARRAY_OFFSET)};
#undef STRUCT
  check(&l, type_of(&l, "program"), sizeof(srt_program), offsets,
        sizeof offsets / sizeof *offsets);
  dispose(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_param_info_layout),
      cmocka_unit_test(test_program_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
