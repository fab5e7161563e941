// shard-opt: an mlir-opt-compatible driver with the nn dialect and our passes
// registered next to every upstream dialect and pass.
//
//   shard-opt [input.mlir|-] [-o out.mlir] [--pass-pipeline=builtin.module(...)]
//             [--PASS[=options] ...] [--split-input-file] [--mlir-print-ir-*]
//
// Diagnostics go to stderr as file:line:col; any error exits with status 1.
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
#include "plan.h" // TP_PLAN_NAMES
#include "args.h"
#include "output.h"
#include "source.h"

typedef struct options {
  const char *input;
  const char *output;
  const char *pipeline;
  const char **pass_flags; // each "name" or "name=options", in order
  int num_pass_flags;
  bool split_input;
  bool print_before_all, print_after_all, print_after_failure;
  bool print_debuginfo, print_generic;
  bool verify_each;
  bool allow_unregistered;
  // The sharding pipeline: nn-verify, tp-plan, tp-partition (+ shard-report).
  const char *tp_plan;
  int64_t tp_size, dp_size;
  bool sequence_parallel, dp_replicate, report;
} options;

static void print_help(void) {
  printf(
      "OVERVIEW: shard-opt: the nn dialect and tensor-parallel passes, on MLIR 22\n\n"
      "USAGE: shard-opt [options] [input file, default -]\n\n"
      "OPTIONS:\n"
      "  -o FILE                      Write output to FILE (default: stdout)\n"
      "  --pass-pipeline=TEXT         Run TEXT, e.g. 'builtin.module(func.func(nn-verify))';\n"
      "                               our passes and upstream ones mix freely\n"
      "  --PASS[=\"k=v ...\"]           Run one pass (ours below, or any upstream pass)\n"
      "  --split-input-file           Process each '// -----' chunk separately\n"
      "  --mlir-print-ir-before-all   Print the IR before every pass (to stderr)\n"
      "  --mlir-print-ir-after-all    Print the IR after every pass (to stderr)\n"
      "  --mlir-print-ir-after-failure Print the IR after a pass fails\n"
      "  --mlir-print-debuginfo       Print locations\n"
      "  --mlir-print-op-generic      Print the generic op form\n"
      "  --verify-each=BOOL           Verify the IR after each pass (default true)\n"
      "  --allow-unregistered-dialect Accept ops of unknown dialects\n"
      "  --tp-plan=NAME|FILE          Shard for tensor parallelism: nn-verify, tp-plan,\n"
      "                               tp-partition. FILE: a JSON plan; NAME: one of\n"
      "                               " TP_PLAN_NAMES "\n"
      "  --tp-size=N, --dp-size=M     Mesh sizes (default 1)\n"
      "  --sequence-parallel          Use the plan's sequence-parallel variant\n"
      "  --dp-replicate               Replicate parameters over dp (default with dp > 1:\n"
      "                               FSDP, each parameter's dim 0 sharded over dp)\n"
      "  --report                     Print per-rank memory and collective traffic (and a\n"
      "                               training step's buffer plan)\n"
      "  -h, --help                   This help\n\n"
      "OUR PASSES:\n");
  int n;
  const tp_pass_info *const *passes = tp_pass_list(&n);
  for (int i = 0; i < n; ++i) {
    printf("  --%-26s %s\n", passes[i]->argument, passes[i]->summary);
    for (int j = 0; j < passes[i]->num_options; ++j)
      printf("      %s=<%s>  %s\n", passes[i]->options[j].name,
             passes[i]->options[j].default_value, passes[i]->options[j].help);
  }
  printf("\nEvery upstream MLIR pass (see mlir-opt --help) is accepted too.\n");
}

static bool flag_value(const char *arg, const char *name, const char **value) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0 || arg[n] != '=')
    return false;
  *value = arg + n + 1;
  return true;
}

static bool parse_bool(const char *s, bool *out) {
  if (!strcmp(s, "true") || !strcmp(s, "1"))
    *out = true;
  else if (!strcmp(s, "false") || !strcmp(s, "0"))
    *out = false;
  else
    return false;
  return true;
}

static bool parse_size(const char *flag, const char *v, int64_t *out) {
  return tool_parse_count("shard-opt", flag, v, INT64_C(1) << 20, out);
}

// Returns 0 on success, 1 on a usage error (reported), -1 for --help.
static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.input = "-", .output = "-", .verify_each = true, .tp_size = 1,
                 .dp_size = 1};
  o->pass_flags = calloc((size_t)argc, sizeof(char *));
  bool have_input = false;
  // shard-opt's own flags; pass flags may repeat (a pipeline can run a
  // pass twice).
  static const char *const kFlags[] = {
      "-o", "--pass-pipeline|-pass-pipeline", "--split-input-file",
      "--mlir-print-ir-before-all", "--mlir-print-ir-after-all",
      "--mlir-print-ir-after-failure", "--mlir-print-debuginfo", "--mlir-print-op-generic",
      "--allow-unregistered-dialect", "--verify-each", "--tp-plan", "--tp-size", "--dp-size",
      "--sequence-parallel", "--dp-replicate", "--report", NULL};
  tool_seen seen = {{0}};
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v;
    if (!strcmp(a, "-h") || !strcmp(a, "--help"))
      return -1;
    if (!tool_seen_once(&seen, "shard-opt", kFlags, a))
      return 1;
    if (!strcmp(a, "-o")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "shard-opt: -o needs a file name\n");
        return 1;
      }
      o->output = argv[++i];
    }
    else if (!strncmp(a, "-o", 2) && a[2] && a[1] != '-')
      o->output = a + 2;
    else if (flag_value(a, "--pass-pipeline", &v) || flag_value(a, "-pass-pipeline", &v))
      o->pipeline = v;
    else if (!strcmp(a, "--pass-pipeline") && i + 1 < argc)
      o->pipeline = argv[++i];
    else if (!strcmp(a, "--split-input-file"))
      o->split_input = true;
    else if (!strcmp(a, "--mlir-print-ir-before-all"))
      o->print_before_all = true;
    else if (!strcmp(a, "--mlir-print-ir-after-all"))
      o->print_after_all = true;
    else if (!strcmp(a, "--mlir-print-ir-after-failure"))
      o->print_after_failure = true;
    else if (!strcmp(a, "--mlir-print-debuginfo"))
      o->print_debuginfo = true;
    else if (!strcmp(a, "--mlir-print-op-generic"))
      o->print_generic = true;
    else if (!strcmp(a, "--allow-unregistered-dialect"))
      o->allow_unregistered = true;
    else if (flag_value(a, "--verify-each", &v)) {
      if (!parse_bool(v, &o->verify_each)) {
        fprintf(stderr, "shard-opt: --verify-each expects true or false, got '%s'\n", v);
        return 1;
      }
    } else if ((!strcmp(a, "--tp-plan") || !strcmp(a, "--tp-size") || !strcmp(a, "--dp-size")) &&
               i + 1 < argc) {
      // `--flag VALUE`: rewrite as `--flag=VALUE` for the cases below.
      static const char *const names[] = {"--tp-plan", "--tp-size", "--dp-size"};
      for (int k = 0; k < 3; ++k)
        if (!strcmp(a, names[k])) {
          if (k == 0)
            o->tp_plan = argv[++i];
          else if (!parse_size(names[k], argv[++i], k == 1 ? &o->tp_size : &o->dp_size))
            return 1;
        }
    } else if (!strcmp(a, "--tp-plan") || !strcmp(a, "--tp-size") || !strcmp(a, "--dp-size")) {
      fprintf(stderr, "shard-opt: %s needs a value\n", a); // the last argument
      return 1;
    } else if (flag_value(a, "--tp-plan", &v)) {
      o->tp_plan = v;
    } else if (flag_value(a, "--tp-size", &v)) {
      if (!parse_size("--tp-size", v, &o->tp_size))
        return 1;
    } else if (flag_value(a, "--dp-size", &v)) {
      if (!parse_size("--dp-size", v, &o->dp_size))
        return 1;
    } else if (!strcmp(a, "--sequence-parallel")) {
      o->sequence_parallel = true;
    } else if (!strcmp(a, "--dp-replicate")) {
      o->dp_replicate = true;
    } else if (!strcmp(a, "--report")) {
      o->report = true;
    } else if (a[0] == '-' && a[1] == '-' && a[2]) {
      o->pass_flags[o->num_pass_flags++] = a + 2;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "shard-opt: unknown option '%s' (see --help)\n", a);
      return 1;
    } else if (have_input) {
      fprintf(stderr, "shard-opt: more than one input file: '%s' and '%s'\n",
              o->input, a);
      return 1;
    } else {
      o->input = a;
      have_input = true;
    }
  }
  if ((o->tp_size > 1 || o->dp_size > 1 || o->sequence_parallel || o->dp_replicate ||
       o->report) &&
      !o->tp_plan) {
    fprintf(stderr, "shard-opt: --tp-size, --dp-size, --sequence-parallel, --dp-replicate and "
                    "--report need --tp-plan=NAME|FILE\n");
    return 1;
  }
  if (!tool_check_path("shard-opt", "input", o->input) ||
      !tool_check_path("shard-opt", "-o", o->output) ||
      (o->tp_plan && !tool_check_path("shard-opt", "--tp-plan", o->tp_plan)))
    return 1;
  if (o->pipeline && o->tp_plan) {
    fprintf(stderr, "shard-opt: --pass-pipeline cannot be combined with --tp-plan\n");
    return 1;
  }
  if (o->pipeline && o->num_pass_flags) {
    fprintf(stderr, "shard-opt: --pass-pipeline cannot be combined with pass "
                    "flags such as '--%s'\n", o->pass_flags[0]);
    return 1;
  }
  return 0;
}

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
         tool_pipeline_add_tp_plan(pm, o->tp_plan, o->tp_size, o->dp_size,
                                   o->sequence_parallel, o->dp_replicate, err, sizeof err) &&
         tool_pipeline_add(pm, "builtin.module(tp-partition)", err, sizeof err);
    if (!ok)
      fprintf(stderr, "shard-opt: --tp-plan: %s\n", err);
  }
  for (int i = 0; ok && i < o->num_pass_flags; ++i) {
    ok = tool_pipeline_add_flag(pm, o->pass_flags[i], err, sizeof err);
    if (!ok) {
      size_t n = strcspn(o->pass_flags[i], "=");
      if (tp_pass_lookup(o->pass_flags[i], n) || strstr(err, "option"))
        fprintf(stderr, "shard-opt: --%s: %s\n", o->pass_flags[i], err);
      else
        fprintf(stderr, "shard-opt: unknown option '--%.*s' (not a flag nor a "
                        "registered pass; see --help)\n", (int)n, o->pass_flags[i]);
    }
  }
  if (ok && o->report)
    ok = tool_pipeline_add_flag(pm, "shard-report", err, sizeof err);
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

// Parses, transforms and prints one chunk. Returns true on success.
static bool process_chunk(MlirContext ctx, const options *o, const tool_chunk *chunk,
                          const char *name, tool_diagnostics *diag, FILE *out) {
  MlirPassManager pm = build_pass_manager(ctx, o);
  if (!pm.ptr)
    return false;
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
  return ok;
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
  tool_diagnostics diag = {0};
  tool_diagnostics_attach(ctx, &diag);
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
  tool_chunk *chunks = NULL;
  int n = tool_split_source(text, len, o->split_input, &chunks);
  const char *name = strcmp(o->input, "-") ? o->input : "<stdin>";
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    if (i > 0)
      fputs("// -----\n", out);
    ok &= process_chunk(ctx, o, &chunks[i], name, &diag, out);
  }
  tool_free_chunks(chunks, n);
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
  int status = parse_args(argc, argv, &o);
  if (status == -1) {
    print_help();
    status = 0;
  } else if (status == 0) {
    status = run(&o);
  }
  free(o.pass_flags);
  return status;
}
