// shard-compile: a Hugging Face config.json to an ahead-of-time compiled,
// tensor-parallel training executable.
//
//   shard-compile CONFIG.json --tp-plan=NAME|FILE --tp-size=N [--dp-size=M] [--cp-size=C]
//                 [--sequence-parallel] --batch B --seq S -o train
//                 [--weights CKPT|DIR] [--emit=exe|obj|llvm|mlir] [--keep-logits]
//                 [--backend=cpu|cuda]
//
// import -> nn-verify -> nn-autodiff -> nn-optimizer -> tp-plan ->
// tp-partition -> overlap-collectives (unless --no-overlap) ->
// lower-to-runtime -> LLVM IR -> object -> link with
// libshardrt and its training driver. Run the result with
// `mpirun -np DP*TP ./train --data TOKENS --steps K ...` (see --help of it).
#define _XOPEN_SOURCE 700 // realpath
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mlir-c/BuiltinAttributes.h>

#include "config.h"
#include "diagnostics.h"
#include "args.h"
#include "output.h"
#include "shardrt/output.h"
#include "source.h"
#include "emit.h"
#include "model.h"
#include "nn.h"
#include "pass.h"
#include "pipeline.h"
#include "tokenizer.h"
#include "weights.h"

typedef struct options {
  const char *config, *output, *plan, *weights, *emit, *backend, *memory_report, *recompute,
      *param_dtype;
  int64_t tp, dp, cp, batch, seq, device_memory, micro_batch;
  bool sp, dp_replicate, timing, keep_logits, no_overlap, cpu_offload;
} options;

static void usage(FILE *out) {
  fprintf(out,
          "USAGE: shard-compile CONFIG.json --tp-plan=NAME|FILE --tp-size=N [--dp-size=M]\n"
          "                     [--cp-size=C]\n"
          "                     [--sequence-parallel] [--dp-replicate] --batch B --seq S -o OUT\n"
          "                     [--weights CKPT|DIR] [--emit=exe|obj|llvm|mlir] [--timing]\n"
          "                     [--keep-logits] [--backend=cpu|cuda] [--param-dtype=f32|bf16]\n"
          "                     [--memory-report FILE.json] [--device-memory BYTES]\n"
          "                     [--activation-checkpointing[=full|attention]]\n"
          "                     [--micro-batch M] [--no-overlap] [--cpu-offload]\n\n"
          "Compiles the model of CONFIG.json into a training executable for a dp x tp\n"
          "mesh, or dp x cp x tp with --cp-size (B: global batch, split over dp; S:\n"
          "sequence length, split over cp). With dp > 1 the\n"
          "parameters, gradients and AdamW moments are sharded over dp as FSDP does\n"
          "(each parameter's dim 0; gathered before each use, gradients\n"
          "reduce-scattered); --dp-replicate keeps a whole copy on every dp rank\n"
          "instead (DDP). --cp-size C (context parallelism, a dp x cp x tp mesh launched\n"
          "as mpirun -np DP*CP*TP) cuts each sequence into 2 x C chunks, cp rank r\n"
          "holding chunks r and 2C-1-r (2C must divide S); the attention all-gathers\n"
          "K/V over cp and reduce-scatters their gradients, parameters shard over\n"
          "dp x cp under FSDP, and loss and gradients reduce over dp x cp; a Mamba2\n"
          "mixer gathers the sequence and runs 1/C of its heads (cpu). --emit=mlir\n"
          "prints the partitioned training step, llvm its LLVM IR, obj the object.\n"
          "--weights checks a checkpoint's names, shapes and dtypes first.\n"
          "--keep-logits keeps the lm_head output to the end of the step (its memory\n"
          "is not reused) so that the driver's --dump can write the logits.\n"
          "--backend=cuda runs the step on an NVIDIA GPU (bf16 compute, fp32 master\n"
          "weights; one GPU per rank); the default cpu backend runs it in fp32.\n"
          "--param-dtype=bf16 computes in bf16 on the cpu too (FSDP2's\n"
          "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): bf16 weight copies,\n"
          "activations and gathers; fp32 master weights, gradients, their reductions\n"
          "and the AdamW moments), the same dtypes in the same places as on cuda;\n"
          "default: f32 on cpu, bf16 on cuda (which has no f32).\n"
          "--memory-report prints what one rank holds (parameters, gradients, moments,\n"
          "copies, the planned temporaries and their peak, the ops' scratch) and\n"
          "writes it as JSON; --device-memory refuses a plan whose total exceeds\n"
          "BYTES (an integer, or with a suffix: 141GB = 141e9, 80GiB = 80 x 2^30).\n"
          "--activation-checkpointing recomputes each decoder layer's forward in the\n"
          "backward from the layer's input (=attention: only the attention modules),\n"
          "with the same losses and gradients bit for bit and fewer live activations.\n"
          "--micro-batch M accumulates gradients: each step runs B / (M x dp) micro-batches\n"
          "of M sequences per rank before one optimizer step, the loss and gradients being\n"
          "the token-weighted mean over all B (the same as one step of B; cpu backend).\n"
          "The parameters' gathers start a layer ahead of their use and the gradients'\n"
          "reductions complete under the backward (non-blocking collectives), a layer's\n"
          "norm weights and biases in one collective;\n"
          "--no-overlap runs each collective where it stands, blocking.\n"
          "--cpu-offload (cuda) keeps the fp32 master weights and AdamW moments in\n"
          "pinned host memory and runs AdamW there (threaded), as FSDP2's\n"
          "CPUOffloadPolicy; the GPU holds the bf16 weights and fp32 gradients\n"
          "(6 bytes per parameter instead of 18), and each step moves the gradients\n"
          "to the host and the bf16 weights back.\n"
          "Run: mpirun -np DP*CP*TP OUT --data TOKENS --steps K --lr F --max-grad-norm F\n"
          "(a program of one rank, dp x cp x tp = 1, needs no MPI: run OUT itself)\n");
}

// `--flag=V` or `--flag V` (advancing *i past V).
static bool value_at(int argc, char **argv, int *i, const char *flag, const char **out) {
  const char *arg = argv[*i];
  size_t n = strlen(flag);
  if (strncmp(arg, flag, n))
    return false;
  if (arg[n] == '=') {
    *out = arg + n + 1;
    return true;
  }
  if (arg[n] == '\0' && *i + 1 < argc) {
    *out = argv[++*i];
    return true;
  }
  return false;
}

// Mesh sizes and shapes: at most 2^24 (the importer's bound on any size).
static bool positive(const char *flag, const char *v, int64_t *out) {
  return tool_parse_count("shard-compile", flag, v, INT64_C(1) << 24, out);
}

// --device-memory: bytes, as an integer or a number with a decimal (kB, MB,
// GB, TB) or binary (KiB, MiB, GiB, TiB) suffix.
static bool parse_bytes(const char *v, int64_t *out) {
  static const struct {
    const char *suffix;
    double scale;
  } units[] = {{"", 1},           {"kB", 1e3},        {"MB", 1e6},        {"GB", 1e9},
               {"TB", 1e12},      {"KiB", 1024.0},    {"MiB", 1048576.0}, {"GiB", 1073741824.0},
               {"TiB", 1099511627776.0}};
  char *end = NULL;
  double x = strtod(v, &end);
  for (size_t i = 0; end != v && i < sizeof units / sizeof *units; ++i)
    if (!strcmp(end, units[i].suffix) && x > 0 && x * units[i].scale < 9.2e18) {
      *out = (int64_t)(x * units[i].scale);
      return true;
    }
  fprintf(stderr,
          "shard-compile: --device-memory expects a positive size in bytes (e.g. 141GB, "
          "80GiB, 150000000000), got '%s'\n",
          v);
  return false;
}

// The flags that take a value (`--flag VALUE` or `--flag=VALUE`).
static bool takes_value(const char *a) {
  static const char *const flags[] = {"-o",        "--tp-plan", "--tp-size", "--dp-size",
                                      "--cp-size", "--batch",   "--seq",     "--weights",
                                      "--emit",    "--backend",       "--param-dtype",
                                      "--memory-report", "--device-memory", "--micro-batch"};
  for (size_t i = 0; i < sizeof flags / sizeof *flags; ++i)
    if (!strcmp(a, flags[i]))
      return true;
  return false;
}

static int parse(int argc, char **argv, options *o) {
  static const char *const kFlags[] = {"-o", "--tp-plan", "--tp-size", "--dp-size", "--cp-size",
                                       "--batch", "--seq", "--weights", "--emit",
                                       "--backend", "--sequence-parallel", "--timing",
                                       "--keep-logits", "--memory-report", "--device-memory",
                                       "--activation-checkpointing", "--micro-batch",
                                       "--dp-replicate", "--no-overlap", "--cpu-offload",
                                       "--param-dtype", NULL};
  tool_seen seen = {{0}};
  *o = (options){.tp = 1, .dp = 1, .cp = 1, .emit = "exe", .backend = "cpu", .recompute = "none",
                 .param_dtype = ""};
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *v;
    if (!tool_seen_once(&seen, "shard-compile", kFlags, a))
      return 1;
#define value(arg, flag, out) value_at(argc, argv, &i, flag, out)
    bool ok = true;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return -1;
    } else if (!strcmp(a, "-o") && i + 1 < argc)
      o->output = argv[++i];
    else if (value(a, "--tp-plan", &v))
      o->plan = v;
    else if (value(a, "--tp-size", &v))
      ok = positive("--tp-size", v, &o->tp);
    else if (value(a, "--dp-size", &v))
      ok = positive("--dp-size", v, &o->dp);
    else if (value(a, "--cp-size", &v))
      ok = positive("--cp-size", v, &o->cp);
    else if (value(a, "--batch", &v))
      ok = positive("--batch", v, &o->batch);
    else if (value(a, "--seq", &v))
      ok = positive("--seq", v, &o->seq);
    else if (value(a, "--micro-batch", &v))
      ok = positive("--micro-batch", v, &o->micro_batch);
    else if (value(a, "--weights", &v))
      o->weights = v;
    else if (value(a, "--emit", &v))
      o->emit = v;
    else if (value(a, "--backend", &v))
      o->backend = v;
    else if (value(a, "--param-dtype", &v))
      o->param_dtype = v;
    else if (value(a, "--memory-report", &v))
      o->memory_report = v;
    else if (value(a, "--device-memory", &v))
      ok = parse_bytes(v, &o->device_memory);
    else if (!strcmp(a, "--sequence-parallel"))
      o->sp = true;
    else if (!strcmp(a, "--dp-replicate"))
      o->dp_replicate = true;
    else if (!strcmp(a, "--no-overlap"))
      o->no_overlap = true;
    else if (!strcmp(a, "--cpu-offload"))
      o->cpu_offload = true;
    else if (!strcmp(a, "--timing"))
      o->timing = true;
    else if (!strcmp(a, "--keep-logits"))
      o->keep_logits = true;
    else if (!strcmp(a, "--activation-checkpointing"))
      o->recompute = "full";
    else if (!strncmp(a, "--activation-checkpointing=", 27)) {
      o->recompute = a + 27;
      if (strcmp(o->recompute, "full") && strcmp(o->recompute, "attention")) {
        fprintf(stderr, "shard-compile: --activation-checkpointing expects full or attention, "
                        "got '%s'\n", o->recompute);
        return 1;
      }
    }
    else if (takes_value(a)) { // the last argument, its value missing
      fprintf(stderr, "shard-compile: %s needs a value\n", a);
      return 1;
    } else if (a[0] == '-') {
      fprintf(stderr, "shard-compile: unknown option '%s' (see --help)\n", a);
      return 1;
    } else if (o->config) {
      fprintf(stderr, "shard-compile: more than one config: '%s' and '%s'\n", o->config, a);
      return 1;
    } else
      o->config = a;
    if (!ok)
      return 1;
#undef value
  }
  const char *missing = !o->config ? "CONFIG.json" : !o->plan ? "--tp-plan" : !o->batch ? "--batch"
                        : !o->seq ? "--seq" : !o->output ? "-o OUT" : NULL;
  if (missing) {
    fprintf(stderr, "shard-compile: missing %s (see --help)\n", missing);
    return 1;
  }
  if (!tool_check_path("shard-compile", "CONFIG.json", o->config) ||
      !tool_check_path("shard-compile", "--tp-plan", o->plan) ||
      !tool_check_path("shard-compile", "-o", o->output) ||
      (o->weights && !tool_check_path("shard-compile", "--weights", o->weights)) ||
      (o->memory_report && !tool_check_path("shard-compile", "--memory-report", o->memory_report)))
    return 1;
  if (strcmp(o->emit, "exe") && strcmp(o->emit, "obj") && strcmp(o->emit, "llvm") &&
      strcmp(o->emit, "mlir")) {
    fprintf(stderr, "shard-compile: --emit expects exe, obj, llvm or mlir, got '%s'\n", o->emit);
    return 1;
  }
  if (strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda")) {
    fprintf(stderr, "shard-compile: --backend expects cpu or cuda, got '%s'\n", o->backend);
    return 1;
  }
  if (strcmp(o->param_dtype, "") && strcmp(o->param_dtype, "f32") &&
      strcmp(o->param_dtype, "bf16")) {
    fprintf(stderr, "shard-compile: --param-dtype expects f32 or bf16, got '%s'\n",
            o->param_dtype);
    return 1;
  }
  if (!strcmp(o->backend, "cuda") && !strcmp(o->param_dtype, "f32")) {
    fprintf(stderr, "shard-compile: --param-dtype=f32: the cuda backend computes in bf16 "
                    "only (fp32 master weights, gradients and moments): drop --param-dtype, "
                    "or use --backend=cpu\n");
    return 1;
  }
  // --emit=mlir stops before lower-to-runtime, where these take effect.
  const char *lowering_flag = o->cpu_offload      ? "--cpu-offload"
                              : *o->param_dtype   ? "--param-dtype"
                              : o->memory_report  ? "--memory-report"
                              : o->device_memory  ? "--device-memory"
                                                  : NULL;
  if (!strcmp(o->emit, "mlir") && lowering_flag) {
    fprintf(stderr, "shard-compile: %s takes effect when the step is lowered, which --emit=mlir "
                    "stops before: use --emit=llvm, obj or exe\n",
            lowering_flag);
    return 1;
  }
  if (o->cpu_offload && strcmp(o->backend, "cuda")) {
    fprintf(stderr, "shard-compile: --cpu-offload moves the fp32 master weights and AdamW "
                    "moments off a GPU into host memory; the %s backend keeps everything in "
                    "host memory already: add --backend=cuda, or drop --cpu-offload\n",
            o->backend);
    return 1;
  }
  if (!strcmp(o->backend, "cuda") && !shard_link_has_cuda() && !strcmp(o->emit, "exe")) {
    fprintf(stderr, "shard-compile: --backend=cuda: this build has no CUDA runtime "
                    "(libshardrt_cuda was not built: no nvcc at configure time); "
                    "--emit=obj|llvm|mlir still work\n");
    return 1;
  }
  // The same bounds as shard-import: every shape's byte size fits int64.
  if (o->batch > (1 << 24) || o->seq > (1 << 24) || o->batch * o->seq > (1 << 24)) {
    fprintf(stderr, "shard-compile: --batch %" PRId64 " x --seq %" PRId64 " exceeds 16777216 "
                    "tokens per step\n", o->batch, o->seq);
    return 1;
  }
  if (o->batch % o->dp) {
    fprintf(stderr, "shard-compile: --batch %" PRId64 " is not divisible by --dp-size %" PRId64
                    "\n", o->batch, o->dp);
    return 1;
  }
  if (o->micro_batch && (o->batch / o->dp) % o->micro_batch) {
    fprintf(stderr, "shard-compile: --micro-batch %" PRId64 " does not divide the %" PRId64
                    " sequences per rank (--batch %" PRId64 " / --dp-size %" PRId64 ")\n",
            o->micro_batch, o->batch / o->dp, o->batch, o->dp);
    return 1;
  }
  if (o->micro_batch && o->keep_logits && o->micro_batch * o->dp != o->batch) {
    fprintf(stderr, "shard-compile: --keep-logits with --micro-batch: the kept logits would be "
                    "the last micro-batch's only\n");
    return 1;
  }
  if (o->cp > 1 && o->seq % (2 * o->cp)) {
    fprintf(stderr, "shard-compile: --seq %" PRId64 " is not divisible by 2 x --cp-size = %" PRId64
                    ": context parallelism cuts each sequence into 2 x cp load-balanced chunks "
                    "(cp rank r holding chunks r and 2 x cp - 1 - r)\n",
            o->seq, 2 * o->cp);
    return 1;
  }
  if (o->micro_batch && !strcmp(o->backend, "cuda") && o->micro_batch * o->dp != o->batch) {
    fprintf(stderr, "shard-compile: --micro-batch: gradient accumulation is not available on "
                    "the cuda backend yet (use --backend=cpu)\n");
    return 1;
  }
  return 0;
}

// Micro-batches per step: 1 without --micro-batch.
static int64_t accumulate_steps(const options *o) {
  return o->micro_batch ? o->batch / (o->micro_batch * o->dp) : 1;
}

// Runs the training pipeline; with `lower` false it stops before lowering.
static bool compile(MlirContext ctx, MlirOperation module, const options *o, bool lower) {
  char err[1024];
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  // Passes with user-given values are created from the values, never from
  // pipeline text a plan name or path could extend.
  // recompute is one of three fixed words (parse checked it).
  char autodiff[128];
  snprintf(autodiff, sizeof autodiff,
           "builtin.module(nn-verify, nn-autodiff{recompute=%s}, nn-optimizer)", o->recompute);
  bool ok =
      tool_pipeline_add(pm, autodiff, err, sizeof err) &&
      tool_pipeline_add_tp_plan(pm, o->plan, o->tp, o->dp, o->cp, o->sp, o->dp_replicate,
                                err, sizeof err) &&
      tool_pipeline_add(pm,
                        o->no_overlap ? "builtin.module(tp-partition)"
                                      : "builtin.module(tp-partition, overlap-collectives)",
                        err, sizeof err);
  if (ok && lower) {
    tp_option_setting settings[] = {
        {"backend", {.s = (char *)o->backend}},
        {"keep-logits", {.b = o->keep_logits}},
        {"memory-report", {.s = (char *)(o->memory_report ? o->memory_report : "")}},
        {"device-memory", {.i = o->device_memory}},
        {"accumulate-steps", {.i = accumulate_steps(o)}},
        {"cpu-offload", {.b = o->cpu_offload}},
        {"param-dtype", {.s = (char *)o->param_dtype}}};
    MlirPass pass = tp_pass_create_with(&tp_lower_to_runtime_pass,
                                        sizeof settings / sizeof *settings, settings, err,
                                        sizeof err);
    if ((ok = pass.ptr != NULL))
      mlirPassManagerAddOwnedPass(pm, pass);
  }
  if (!ok)
    fprintf(stderr, "shard-compile: %s\n", err);
  ok = ok && mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, module));
  mlirPassManagerDestroy(pm);
  return ok;
}

// Prints `module` where `output` says (a file, or stdout); messages name
// the user's path.
static bool write_module(MlirOperation module, const tool_output *output) {
  const char *path = output->path;
  FILE *out = output->to_stdout ? stdout : fopen(output->target, "w");
  if (!out) {
    fprintf(stderr, "shard-compile: cannot write '%s': %s\n", path, strerror(errno));
    return false;
  }
  mlirOperationPrint(module, tool_print_to_file, out);
  fputc('\n', out);
  bool ok = !ferror(out);
  ok = (out == stdout ? fflush(out) == 0 : fclose(out) == 0) && ok;
  if (!ok) // e.g. a full disk, /dev/full
    fprintf(stderr, "shard-compile: cannot write '%s': %s\n", path, strerror(errno));
  return ok;
}

// The config's text (an export writes it back as the model directory's
// config.json) and the checkpoint name layouts of its architecture, as
// module attributes that lower-to-runtime puts in the program table.
static void record_checkpoint_facts(MlirContext ctx, MlirOperation module,
                                    const import_config *cfg, const char *tokenizer,
                                    size_t tokenizer_len) {
  const char *names = cfg->arch->checkpoint_names ? cfg->arch->checkpoint_names : "";
  // The config's absolute path: an export finds the tokenizer files beside
  // it wherever the program runs.
  char *abs = realpath(cfg->path, NULL);
  if (abs)
    mlirOperationSetAttributeByName(module, mlirStringRefCreateFromCString("nn.config_path"),
                                    mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(abs)));
  free(abs);
  mlirOperationSetAttributeByName(
      module, mlirStringRefCreateFromCString("nn.config_json"),
      mlirStringAttrGet(ctx, mlirStringRefCreate(cfg->text, cfg->text_len)));
  mlirOperationSetAttributeByName(module, mlirStringRefCreateFromCString("nn.checkpoint_names"),
                                  mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(names)));
  // The tokenizer.json beside the config, as checked now: an export writes
  // these bytes, not whatever lies beside the config when it runs.
  if (tokenizer)
    mlirOperationSetAttributeByName(
        module, mlirStringRefCreateFromCString("nn.tokenizer_json"),
        mlirStringAttrGet(ctx, mlirStringRefCreate(tokenizer, tokenizer_len)));
}

static int run(const options *o) {
  if (!tool_check_output("shard-compile", o->output, o->config))
    return 1;
  // An executable is made by the linker, which replaces its file, and LLVM
  // seeks in an object: neither goes to stdout (a pipe or a redirected
  // file). LLVM writes IR to stdout itself, given "-".
  bool binary = !strcmp(o->emit, "exe") || !strcmp(o->emit, "obj");
  srt_status so = binary ? srt_output_check_seekable("-o", o->output) : NULL;
  if (binary && !so && !strcmp(o->output, "-")) // the linker would make a file named "-"
    so = SRT_ERROR(SRT_INVALID_ARGUMENT, "-o '-': an executable or object is a file: give its "
                   "path");
  if (so) {
    fprintf(stderr, "shard-compile: %s (--emit=mlir|llvm print there)\n",
            srt_status_message(so));
    srt_status_free(so);
    return 1;
  }
  double t0 = tool_now_ms();
  char err[2048];
  import_config cfg;
  if (!import_config_load(o->config, &cfg, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  if (cfg.warnings) // keys the compiled step ignores
    fputs(cfg.warnings, stderr);
  char *tokenizer = NULL;
  size_t tokenizer_len = 0;
  if (!compile_tokenizer_read(cfg.path, cfg.vocab, &tokenizer, &tokenizer_len, err,
                              sizeof err)) {
    fprintf(stderr, "%s\n", err);
    import_config_free(&cfg);
    return 1;
  }
  MlirContext ctx = nn_context_create();
  tool_diagnostics diag = {0};
  tool_diagnostics_attach(ctx, &diag);
  import_model model = {0};
  // The graph is one micro-batch of every rank (the whole batch without
  // accumulation).
  import_options io = {.batch = o->batch / accumulate_steps(o), .seq = o->seq, .cp = o->cp};
  bool ok = import_model_build(ctx, &cfg, &io, &model, err, sizeof err);
  if (!ok)
    fprintf(stderr, "shard-compile: %s\n", err);
  if (ok && o->weights && !import_check_weights(o->weights, &model, SRT_F32, true,
                                                  cfg.arch->checkpoint_names, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    ok = false;
  }
  double t1 = tool_now_ms();
  MlirOperation module = ok ? mlirModuleGetOperation(model.module) : (MlirOperation){NULL};
  if (ok) // what the training binary's checkpoints and exports need (program.h)
    record_checkpoint_facts(ctx, module, &cfg, tokenizer, tokenizer_len);
  free(tokenizer); // the attribute holds its own copy
  bool mlir_only = !strcmp(o->emit, "mlir");
  ok = ok && compile(ctx, module, o, !mlir_only);
  double t2 = tool_now_ms();
  tool_output output = {0};
  ok = ok && tool_output_begin("shard-compile", o->output, &output);
  if (ok && mlir_only) {
    ok = write_module(module, &output);
  } else if (ok) {
    bool exe = !strcmp(o->emit, "exe");
    // An executable's object goes to a private temporary folder (never
    // beside an output that may be a device: no "/dev/null.o").
    char object[4096], dir[4096] = "";
    snprintf(object, sizeof object, "%s", output.to_stdout ? "-" : output.target);
    bool have_dir = false;
    if (exe) {
      const char *tmpdir = getenv("TMPDIR");
      snprintf(dir, sizeof dir, "%.4000s/shard-compile-XXXXXX",
               tmpdir && *tmpdir ? tmpdir : "/tmp");
      if (!(have_dir = mkdtemp(dir) != NULL)) {
        snprintf(err, sizeof err, "cannot create a temporary folder '%.1900s': %s", dir,
                 strerror(errno));
        ok = false;
      }
      snprintf(object, sizeof object, "%.4000s/step.o", dir);
    }
    ok = ok && shard_emit(module, object, !strcmp(o->emit, "llvm"), err, sizeof err);
    if (ok && exe)
      ok = shard_link(object, output.target, o->output, !strcmp(o->backend, "cuda"),
                      o->tp * o->dp * o->cp == 1, err, sizeof err);
    if (have_dir) {
      unlink(object);
      rmdir(dir);
    }
    if (!ok)
      fprintf(stderr, "shard-compile: %s\n", err);
  }
  ok = tool_output_finish("shard-compile", &output, ok);
  if (o->timing)
    fprintf(stderr, "shard-compile: import %.1f ms, passes %.1f ms, emit+link %.1f ms\n",
            t1 - t0, t2 - t1, tool_now_ms() - t2);
  import_model_free(&model);
  mlirContextDestroy(ctx);
  import_config_free(&cfg);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  options o;
  int status = parse(argc, argv, &o);
  if (status)
    return status < 0 ? 0 : status;
  return run(&o);
}
