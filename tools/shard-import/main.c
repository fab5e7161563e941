// shard-import: a Hugging Face config.json (+ safetensors weights) to an
// nn-dialect model graph.
//
//   shard-import CONFIG.json [--weights FILE.safetensors|DIR] --batch B --seq S
//                [--dtype f32|bf16] [--logits] [-o OUT.mlir] [--summary]
//                [--print-locations] [--no-verify] [--timing]
//
// Errors go to stderr as `file:line:col: error: ...` (or `file: error: ...`)
// naming the key or tensor involved; any error exits with status 1.
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "diagnostics.h"
#include "args.h"
#include "output.h"
#include "source.h"
#include "model.h"
#include "mlir-c/Pass.h"
#include "nn.h"
#include "pass.h"
#include "summary.h"
#include "weights.h"

typedef struct options {
  const char *config;
  const char *weights;
  const char *output; // NULL: stdout unless --summary
  int64_t batch, seq; // 0 = not given
  int64_t cp;         // --cp-size, 0 = not given (1)
  bool bf16, logits, summary, locations, verify, timing;
} options;

static void print_help(void) {
  printf(
      "OVERVIEW: shard-import: Hugging Face config.json (+ safetensors) to an\n"
      "          nn-dialect graph: func.func @forward(input_ids, labels, params...)\n\n"
      "USAGE: shard-import CONFIG.json --batch B --seq S [options]\n\n"
      "OPTIONS:\n"
      "  --batch B             Batch size of input_ids and labels (>= 1)\n"
      "  --seq S               Sequence length (>= 2: the loss is shifted)\n"
      "  --dtype f32|bf16      Parameter and activation element type (default f32)\n"
      "  --cp-size N           Context parallelism: the graph of one rank of a cp\n"
      "                        axis of N (rows cut into N chunk rows, [B x N, S / N];\n"
      "                        the attention all-gathers K/V over cp; the loss\n"
      "                        takes labels already shifted); 2 N must divide S\n"
      "  --logits              Also return the logits as a second result\n"
      "  --weights PATH        Check a .safetensors file, or a directory with\n"
      "                        model.safetensors or model.safetensors.index.json,\n"
      "                        against the graph (names, shapes, dtypes)\n"
      "  -o FILE               Write the graph to FILE (default: stdout)\n"
      "  --summary             Print parameter counts, layers, heads and tied\n"
      "                        parameters (the graph is then written only with -o;\n"
      "                        --batch/--seq default to 1 and 2)\n"
      "  --print-locations     Print op locations (config keys) in the output\n"
      "  --no-verify           Skip verifying the graph (IRDL and nn-verify)\n"
      "  --timing              Print the time of each phase to stderr\n"
      "  -h, --help            This help\n\n"
      "ARCHITECTURES: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,\n"
      "  Gemma3ForCausalLM, Gemma3ForConditionalGeneration (text part),\n"
      "  NemotronHForCausalLM\n");
}

// Parses a positive integer flag value: 2^24 keeps every activation's
// element count (batch x seq x features) within int64 for any config the
// parser accepts.
static bool parse_size(const char *flag, const char *v, int64_t *out) {
  return tool_parse_count("shard-import", flag, v, INT64_C(1) << 24, out);
}

// `--name VALUE` or `--name=VALUE`; advances *i past a separate value.
static bool flag_arg(int argc, char **argv, int *i, const char *name,
                     const char **value) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0)
    return false;
  if (a[n] == '=') {
    *value = a + n + 1;
    return true;
  }
  if (a[n] != '\0')
    return false;
  if (*i + 1 >= argc) {
    *value = NULL;
    return true;
  }
  *value = argv[++*i];
  return true;
}

// 0: ok, 1: usage error (reported), -1: --help.
static int parse_args(int argc, char **argv, options *o) {
  static const char *const kFlags[] = {"--batch", "--seq", "--cp-size", "--dtype", "--weights",
                                       "-o|--output", "--logits", "--summary",
                                       "--print-locations", "--no-verify", "--timing",
                                       NULL};
  tool_seen seen = {{0}};
  *o = (options){.verify = true};
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v;
    if (!strcmp(a, "-h") || !strcmp(a, "--help"))
      return -1;
    if (!tool_seen_once(&seen, "shard-import", kFlags, a))
      return 1;
    bool ok = true;
    if (flag_arg(argc, argv, &i, "--batch", &v))
      ok = v && parse_size("--batch", v, &o->batch);
    else if (flag_arg(argc, argv, &i, "--seq", &v))
      ok = v && parse_size("--seq", v, &o->seq);
    else if (flag_arg(argc, argv, &i, "--cp-size", &v))
      ok = v && parse_size("--cp-size", v, &o->cp);
    else if (flag_arg(argc, argv, &i, "--dtype", &v)) {
      ok = v != NULL;
      if (v && strcmp(v, "f32") && strcmp(v, "bf16")) {
        fprintf(stderr, "shard-import: --dtype expects f32 or bf16, got '%s'\n", v);
        return 1;
      }
      o->bf16 = v && !strcmp(v, "bf16");
    } else if (flag_arg(argc, argv, &i, "--weights", &v))
      ok = (o->weights = v) != NULL;
    else if (!strcmp(a, "-o") || flag_arg(argc, argv, &i, "--output", &v)) {
      if (!strcmp(a, "-o"))
        v = i + 1 < argc ? argv[++i] : NULL;
      ok = (o->output = v) != NULL;
    } else if (!strcmp(a, "--logits"))
      o->logits = true;
    else if (!strcmp(a, "--summary"))
      o->summary = true;
    else if (!strcmp(a, "--print-locations"))
      o->locations = true;
    else if (!strcmp(a, "--no-verify"))
      o->verify = false;
    else if (!strcmp(a, "--timing"))
      o->timing = true;
    else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "shard-import: unknown option '%s' (see --help)\n", a);
      return 1;
    } else if (o->config) {
      fprintf(stderr, "shard-import: more than one config: '%s' and '%s'\n",
              o->config, a);
      return 1;
    } else
      o->config = a;
    if (!ok) {
      if (!v)
        fprintf(stderr, "shard-import: %s needs a value\n", a);
      return 1;
    }
  }
  if (!o->config) {
    fprintf(stderr, "shard-import: no config.json given (see --help)\n");
    return 1;
  }
  if (!tool_check_path("shard-import", "CONFIG.json", o->config) ||
      (o->weights && !tool_check_path("shard-import", "--weights", o->weights)) ||
      (o->output && !tool_check_path("shard-import", "-o", o->output)))
    return 1;
  bool graph_out = !o->summary || o->output;
  if (graph_out && (!o->batch || !o->seq)) {
    fprintf(stderr, "shard-import: --batch and --seq are required to write a graph\n");
    return 1;
  }
  if (!o->batch)
    o->batch = 1;
  if (!o->seq)
    o->seq = 2;
  if (o->seq < 2) {
    fprintf(stderr, "shard-import: --seq must be at least 2 (the loss compares "
                    "position i with label i + 1), got %" PRId64 "\n", o->seq);
    return 1;
  }
  if (o->cp > 1 && o->seq % (2 * o->cp)) {
    fprintf(stderr, "shard-import: --seq %" PRId64 " is not divisible by 2 x --cp-size = %" PRId64
                    ": context parallelism cuts each row into 2 x cp load-balanced chunks\n",
            o->seq, 2 * o->cp);
    return 1;
  }
  return 0;
}

// IRDL verification and nn-verify; diagnostics print at config locations.
static bool verify(MlirContext ctx, MlirModule module) {
  MlirOperation op = mlirModuleGetOperation(module);
  if (!mlirOperationVerify(op))
    return false;
  char err[512];
  MlirPass pass = tp_pass_create(&tp_nn_verify_pass, NULL, err, sizeof err);
  if (!pass.ptr) {
    fprintf(stderr, "shard-import: %s\n", err);
    return false;
  }
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  mlirPassManagerAddOwnedPass(pm, pass);
  MlirLogicalResult r = mlirPassManagerRunOnOp(pm, op);
  mlirPassManagerDestroy(pm);
  return mlirLogicalResultIsSuccess(r);
}

static bool write_graph(const options *o, MlirModule module) {
  tool_output output;
  if (!tool_output_begin("shard-import", o->output ? o->output : "-", &output))
    return false;
  bool to_stdout = output.to_stdout;
  FILE *out = to_stdout ? stdout : fopen(output.target, "w");
  if (!out) {
    fprintf(stderr, "shard-import: cannot write '%s': %s\n", o->output,
            strerror(errno));
    return tool_output_finish("shard-import", &output, false); // removes the temporary
  }
  MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
  if (o->locations)
    mlirOpPrintingFlagsEnableDebugInfo(flags, true, false);
  mlirOperationPrintWithFlags(mlirModuleGetOperation(module), flags, tool_print_to_file,
                              out);
  mlirOpPrintingFlagsDestroy(flags);
  fputc('\n', out);
  bool ok = !ferror(out);
  if (!to_stdout)
    ok = fclose(out) == 0 && ok;
  else
    ok = fflush(out) == 0 && ok;
  if (!ok)
    fprintf(stderr, "shard-import: error writing '%s': %s\n", to_stdout ? "<stdout>" : o->output,
            strerror(errno));
  return tool_output_finish("shard-import", &output, ok);
}

int main(int argc, char **argv) {
  options o;
  int rc = parse_args(argc, argv, &o);
  if (rc < 0) {
    print_help();
    return 0;
  }
  if (rc)
    return 1;
  if (!tool_check_output("shard-import", o.output ? o.output : "-", o.config))
    return 1;

  double t0 = tool_now_ms();
  char err[2048];
  import_config cfg;
  if (!import_config_load(o.config, &cfg, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  if (cfg.warnings) // keys the compiled step ignores
    fputs(cfg.warnings, stderr);
  double t1 = tool_now_ms();

  MlirContext ctx = nn_context_create();
  if (mlirContextIsNull(ctx)) {
    fprintf(stderr, "shard-import: cannot load the nn dialect (a build bug)\n");
    import_config_free(&cfg);
    return 1;
  }
  tool_diagnostics diags = {.out = stderr};
  tool_diagnostics_attach(ctx, &diags);
  double t2 = tool_now_ms();

  import_options io = {.batch = o.batch, .seq = o.seq, .cp = o.cp, .bf16 = o.bf16,
                       .logits = o.logits};
  import_model model;
  bool ok = import_model_build(ctx, &cfg, &io, &model, err, sizeof err);
  if (!ok)
    fprintf(stderr, "%s\n", err);
  double t3 = tool_now_ms();
  if (ok && o.verify)
    ok = verify(ctx, model.module);
  double t4 = tool_now_ms();
  if (ok && o.weights) {
    ok = import_check_weights(o.weights, &model, o.bf16 ? SRT_BF16 : SRT_F32, false,
                              cfg.arch->checkpoint_names, err,
                              sizeof err);
    if (!ok)
      fprintf(stderr, "%s\n", err);
  }
  double t5 = tool_now_ms();
  if (ok && o.summary)
    import_summary_print(stdout, &cfg, &model);
  if (ok && (!o.summary || o.output))
    ok = write_graph(&o, model.module);
  double t6 = tool_now_ms();
  if (o.timing)
    fprintf(stderr,
            "timing (ms): config %.2f, context %.2f, build %.2f, verify %.2f, "
            "weights %.2f, output %.2f, total %.2f\n",
            t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t6 - t0);

  if (model.module.ptr)
    import_model_free(&model);
  mlirContextDestroy(ctx);
  import_config_free(&cfg);
  return ok ? 0 : 1;
}
