// libFuzzer target: --verify-diagnostics' reading of a source's expected-*
// comments (tools/common/expected.c) and of their -re patterns
// (tools/common/ere.c), on arbitrary text: every comment found is checked
// against diagnostics at the source's own lines and at no position; any
// refusal is a printed message, never a crash or an overrun.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ere.h"
#include "expected.h"
#include "mlir-c/IR.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static MlirContext context(void) {
  static MlirContext ctx;
  if (mlirContextIsNull(ctx))
    ctx = mlirContextCreate();
  return ctx;
}

static FILE *sink(void) {
  static FILE *f;
  if (!f)
    f = fopen("/dev/null", "w");
  return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  tool_source src = {.name = "fuzz.mlir", .text = text, .len = size};
  tool_expectations e;
  if (tool_expectations_scan(&e, &src, false, sink())) {
    // Each expectation's own text as the message of a diagnostic on its
    // line, then at no position (matched, near miss or unexpected).
    MlirContext ctx = context();
    MlirStringRef name = mlirStringRefCreateFromCString(src.name);
    for (int i = 0; i < e.count; ++i) {
      tool_expected *x = &e.items[i];
      char *msg = strndup(text + x->text_at, x->text_len);
      if (!msg)
        break;
      MlirLocation loc = x->unknown ? mlirLocationUnknownGet(ctx)
                                    : mlirLocationFileLineColGet(ctx, name, x->line, 1);
      tool_expectations_check(&e, sink(), loc, 0, x->kind, msg);
      tool_expectations_check(&e, sink(), mlirLocationUnknownGet(ctx), 0, x->kind, msg);
      free(msg);
    }
    (void)tool_expectations_finish(&e, sink());
  }
  tool_expectations_free(&e);
  // The whole input as one -re pattern part.
  tool_text out = {0};
  char why[128] = "";
  if (!tool_ere_append_group(&out, text, size, why, sizeof why) && !why[0])
    abort(); // a refusal says why
  free(out.data);
  free(text);
  return 0;
}
