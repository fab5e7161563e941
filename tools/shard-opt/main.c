// shard-opt: an mlir-opt-compatible driver with the nn dialect and our passes
// registered next to every upstream dialect and the passes of MLIR's
// libraries (not mlir-opt's test passes, which the C API does not register).
//
//   shard-opt [input.mlir|-] [-o out.mlir] [--pass-pipeline=builtin.module(...)]
//             [--PASS[=options] ...] [--split-input-file] [--verify-diagnostics]
//             [--mlir-print-ir-*]   (flags with one dash or two: options.h)
//
// Diagnostics go to stderr as mlir-opt prints them (file:line:col, the
// source line, a caret); any error exits with status 1. Under
// --verify-diagnostics they are checked against the input's expected-*
// comments instead, and the check decides the exit status.
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnostics.h"
#include "mlir-c/BuiltinAttributes.h"
#include "nn.h"
#include "pass.h"
#include "pipeline.h"
#include "options.h"
#include "output.h"
#include "source.h"

// Builds the pass manager described by the options; NULL-ptr pm on error.
static MlirPassManager build_pass_manager(MlirContext ctx, const options *o) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  char err[1024];
  bool ok = true;
  if (o->pipeline) {
    ok = tool_pipeline_add(pm, o->pipeline, err, sizeof err);
    if (!ok)
      fprintf(stderr, "shard-opt: invalid --pass-pipeline: %s\n", err);
  }
  if (o->tp_plan) {
    // nn-verify, tp-plan (built from the values: a plan name or path is
    // never read as pipeline text), tp-partition.
    ok = ok && tool_pipeline_add(pm, "builtin.module(nn-verify)", err, sizeof err) &&
         tool_pipeline_add_tp_plan(pm, o->tp_plan, o->tp_size, o->dp_size, o->cp_size,
                                   o->sequence_parallel, o->dp_replicate, err, sizeof err) &&
         tool_pipeline_add(pm, "builtin.module(tp-partition)", err, sizeof err);
    if (!ok)
      fprintf(stderr, "shard-opt: --tp-plan: %s\n", err);
  }
  for (int i = 0; ok && i < o->num_pass_flags; ++i) {
    ok = tool_pipeline_add_flag(ctx, pm, o->pass_flags[i], err, sizeof err);
    if (!ok) {
      size_t n = strcspn(o->pass_flags[i], "=");
      const char *arg = o->pass_args[i];
      // MLIR's parser says so of a name it does not know; any other error
      // is the pass's own (a bad option) and is shown as MLIR words it.
      if (tp_pass_lookup(o->pass_flags[i], n) ||
          !strstr(err, "does not refer to a registered pass"))
        fprintf(stderr, "shard-opt: %s: %s\n", arg, err);
      else
        fprintf(stderr, "shard-opt: unknown option '%.*s' (not a flag nor a "
                        "registered pass; see --help)\n",
                (int)(o->pass_flags[i] - arg + (ptrdiff_t)n), arg);
    }
  }
  if (ok && o->report)
    ok = tool_pipeline_add_flag(ctx, pm, "shard-report", err, sizeof err);
  if (!ok) {
    mlirPassManagerDestroy(pm);
    return (MlirPassManager){NULL};
  }
  mlirPassManagerEnableVerifier(pm, o->verify_each);
  if (o->print_before_all || o->print_after_all || o->print_after_failure) {
    // Printing the whole module after a nested pass requires a single thread
    // (MLIR aborts otherwise); mlir-opt makes the same choice.
    mlirContextEnableMultithreading(ctx, false);
    MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
    mlirPassManagerEnableIRPrinting(pm, o->print_before_all, o->print_after_all,
                                    true, false, o->print_after_failure, flags,
                                    mlirStringRefCreate(NULL, 0));
    mlirOpPrintingFlagsDestroy(flags);
  }
  return pm;
}

enum { CHUNK_OK, CHUNK_FAILED, CHUNK_BAD_PIPELINE };

// Parses, transforms and prints one chunk (printing nothing when any step
// fails, as mlir-opt). Returns CHUNK_OK, CHUNK_FAILED (diagnosed), or
// CHUNK_BAD_PIPELINE when the flags name no valid pipeline (a usage error).
static int process_chunk(MlirContext ctx, const options *o, const tool_chunk *chunk,
                         const char *name, tool_diagnostics *diag, FILE *out) {
  MlirPassManager pm = build_pass_manager(ctx, o);
  if (!pm.ptr)
    return CHUNK_BAD_PIPELINE;
  diag->column_shift_line1 = chunk->column_shift_line1;
  MlirOperation module = tool_parse_chunk(ctx, chunk, name);
  bool ok = !mlirOperationIsNull(module);
  if (ok)
    ok = mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, module));
  if (ok) {
    MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
    if (o->print_debuginfo)
      mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
    if (o->print_generic)
      mlirOpPrintingFlagsPrintGenericOpForm(flags);
    mlirOperationPrintWithFlags(module, flags, tool_print_to_file, out);
    fputc('\n', out);
    mlirOpPrintingFlagsDestroy(flags);
  }
  if (!mlirOperationIsNull(module))
    mlirOperationDestroy(module);
  mlirPassManagerDestroy(pm);
  return ok ? CHUNK_OK : CHUNK_FAILED;
}

// Processes every chunk of `text` into `out`. Under --verify-diagnostics
// the chunks' own failures are what the expectations check, so the verdict
// is the check's, as in mlir-opt.
static bool process_all(MlirContext ctx, const options *o, const tool_source *src,
                        char *text, size_t len, FILE *out) {
  tool_expectations expect = {0};
  tool_diagnostics diag = {.source = src};
  if (o->verify_diagnostics) {
    if (!tool_expectations_scan(&expect, src,
                                o->verify_diagnostics == OPT_VERIFY_ONLY_EXPECTED, stderr)) {
      fprintf(stderr, "shard-opt: out of memory\n");
      tool_expectations_free(&expect);
      return false;
    }
    diag.expect = &expect;
  }
  MlirDiagnosticHandlerID id = tool_diagnostics_attach(ctx, &diag);
  tool_chunk *chunks = NULL;
  int n = tool_split_source(text, len, o->split_input, &chunks);
  bool ok = n > 0, usage_ok = true;
  if (n < 0)
    fprintf(stderr, "shard-opt: out of memory\n");
  for (int i = 0; usage_ok && i < n; ++i) {
    if (i > 0)
      fputs("// -----\n", out);
    int r = process_chunk(ctx, o, &chunks[i], src->name, &diag, out);
    usage_ok = r != CHUNK_BAD_PIPELINE;
    ok &= r == CHUNK_OK || (o->verify_diagnostics && usage_ok);
  }
  tool_free_chunks(chunks, n);
  if (o->verify_diagnostics && usage_ok)
    ok &= tool_expectations_finish(&expect, stderr);
  mlirContextDetachDiagnosticHandler(ctx, id);
  tool_expectations_free(&expect);
  return ok && usage_ok;
}

static int run(const options *o) {
  if (!tool_check_output("shard-opt", o->output, strcmp(o->input, "-") ? o->input : NULL))
    return 1;
  size_t len = 0;
  char why[1024];
  // IR text of the largest models is tens of MiB; 4 GiB bounds a wrong input.
  char *text = tool_read_file(o->input, (size_t)4 << 30, &len, why, sizeof why);
  if (!text) {
    fprintf(stderr, "shard-opt: %s\n", why);
    return 1;
  }
  MlirContext ctx = nn_context_create();
  if (mlirContextIsNull(ctx)) {
    fprintf(stderr, "shard-opt: internal error: the nn dialect failed to load\n");
    free(text);
    return 1;
  }
  mlirContextSetAllowUnregisteredDialects(ctx, o->allow_unregistered);
  tool_output output;
  FILE *out = NULL;
  if (tool_output_begin("shard-opt", o->output, &output)) {
    out = output.to_stdout ? stdout : fopen(output.target, "w");
    if (!out) {
      fprintf(stderr, "shard-opt: cannot write '%s': %s\n", o->output, strerror(errno));
      tool_output_finish("shard-opt", &output, false); // removes the temporary
    }
  }
  if (!out) {
    mlirContextDestroy(ctx);
    free(text);
    return 1;
  }
  tool_source src = {.name = strcmp(o->input, "-") ? o->input : "<stdin>", .text = text,
                     .len = len};
  bool ok = process_all(ctx, o, &src, text, len, out);
  bool written = out != stdout ? fclose(out) == 0 : fflush(stdout) == 0 && !ferror(stdout);
  if (!written)
    fprintf(stderr, "shard-opt: cannot write '%s': %s\n", o->output, strerror(errno));
  ok &= written;
  ok = tool_output_finish("shard-opt", &output, ok);
  mlirContextDestroy(ctx);
  free(text);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  options o;
  int status = opt_parse(argc, argv, &o);
  if (status == -1) {
    opt_print_help();
    status = 0;
  } else if (status == 0) {
    status = run(&o);
  }
  free(o.pass_flags);
  free(o.pass_args);
  return status;
}
