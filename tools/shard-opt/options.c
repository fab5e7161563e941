// shard-opt's command line (options.h). Spellings follow LLVM's
// command-line library, which mlir-opt parses with: a flag takes one dash
// or two; a flag with a value takes it as `--flag=value` or `--flag value`;
// a boolean flag only as `--flag` or `--flag=true|false` (`--flag false`
// would be a second input file); `--` ends the flags.
#include "options.h"
#include "plan.h" // TP_PLAN_NAMES

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "pass.h"

typedef enum { F_BOOL, F_VALUE, F_OPTIONAL } flag_kind;

typedef enum {
  F_OUTPUT, F_PIPELINE, F_SPLIT, F_VERIFY_DIAGNOSTICS, F_BEFORE_ALL, F_AFTER_ALL,
  F_AFTER_FAILURE, F_DEBUGINFO, F_GENERIC, F_ALLOW_UNREGISTERED, F_VERIFY_EACH, F_TP_PLAN,
  F_TP_SIZE, F_DP_SIZE, F_CP_SIZE, F_SEQUENCE_PARALLEL, F_DP_REPLICATE, F_REPORT, F_COUNT
} flag_id;

static const struct {
  const char *name;
  flag_kind kind;
} kFlags[F_COUNT] = {
    [F_OUTPUT] = {"o", F_VALUE},
    [F_PIPELINE] = {"pass-pipeline", F_VALUE},
    [F_SPLIT] = {"split-input-file", F_OPTIONAL},
    [F_VERIFY_DIAGNOSTICS] = {"verify-diagnostics", F_OPTIONAL},
    [F_BEFORE_ALL] = {"mlir-print-ir-before-all", F_BOOL},
    [F_AFTER_ALL] = {"mlir-print-ir-after-all", F_BOOL},
    [F_AFTER_FAILURE] = {"mlir-print-ir-after-failure", F_BOOL},
    [F_DEBUGINFO] = {"mlir-print-debuginfo", F_BOOL},
    [F_GENERIC] = {"mlir-print-op-generic", F_BOOL},
    [F_ALLOW_UNREGISTERED] = {"allow-unregistered-dialect", F_BOOL},
    [F_VERIFY_EACH] = {"verify-each", F_BOOL},
    [F_TP_PLAN] = {"tp-plan", F_VALUE},
    [F_TP_SIZE] = {"tp-size", F_VALUE},
    [F_DP_SIZE] = {"dp-size", F_VALUE},
    [F_CP_SIZE] = {"cp-size", F_VALUE},
    [F_SEQUENCE_PARALLEL] = {"sequence-parallel", F_BOOL},
    [F_DP_REPLICATE] = {"dp-replicate", F_BOOL},
    [F_REPORT] = {"report", F_BOOL},
};

// LLVM's spellings of a boolean value.
static bool parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"true", "TRUE", "True", "1"};
  static const char *const no[] = {"false", "FALSE", "False", "0"};
  for (int i = 0; i < 4; ++i) {
    if (!strcmp(s, yes[i]))
      return *out = true;
    if (!strcmp(s, no[i]))
      return !(*out = false);
  }
  return false;
}

static flag_id find_flag(const char *name, size_t len) {
  for (int i = 0; i < F_COUNT; ++i)
    if (strlen(kFlags[i].name) == len && !strncmp(kFlags[i].name, name, len))
      return (flag_id)i;
  return F_COUNT;
}

static bool set_bool(options *o, flag_id id, bool v) {
  bool *target[F_COUNT] = {
      [F_BEFORE_ALL] = &o->print_before_all, [F_AFTER_ALL] = &o->print_after_all,
      [F_AFTER_FAILURE] = &o->print_after_failure, [F_DEBUGINFO] = &o->print_debuginfo,
      [F_GENERIC] = &o->print_generic, [F_ALLOW_UNREGISTERED] = &o->allow_unregistered,
      [F_VERIFY_EACH] = &o->verify_each, [F_SEQUENCE_PARALLEL] = &o->sequence_parallel,
      [F_DP_REPLICATE] = &o->dp_replicate, [F_REPORT] = &o->report};
  *target[id] = v;
  return true;
}

// Applies flag `id`, spelled `arg`, with value `v` (NULL: none given).
static bool apply(options *o, flag_id id, const char *arg, const char *v) {
  int64_t max = INT64_C(1) << 20;
  switch (id) {
  case F_OUTPUT: o->output = v; return true;
  case F_PIPELINE: o->pipeline = v; return true;
  case F_TP_PLAN: o->tp_plan = v; return true;
  case F_TP_SIZE: return tool_parse_count("shard-opt", "--tp-size", v, max, &o->tp_size);
  case F_DP_SIZE: return tool_parse_count("shard-opt", "--dp-size", v, max, &o->dp_size);
  case F_CP_SIZE: return tool_parse_count("shard-opt", "--cp-size", v, max, &o->cp_size);
  case F_SPLIT:
    // mlir-opt 22 takes another marker as the value; we split at the default.
    if (v && *v && strcmp(v, "// -----")) {
      fprintf(stderr, "shard-opt: %s: only the default marker '// -----' is supported\n", arg);
      return false;
    }
    return o->split_input = true;
  case F_VERIFY_DIAGNOSTICS:
    if (!v || !*v || !strcmp(v, "all"))
      o->verify_diagnostics = OPT_VERIFY_ALL;
    else if (!strcmp(v, "only-expected"))
      o->verify_diagnostics = OPT_VERIFY_ONLY_EXPECTED;
    else {
      fprintf(stderr, "shard-opt: --verify-diagnostics expects all or only-expected, got '%s'\n",
              v);
      return false;
    }
    return true;
  default: {
    bool b = true;
    if (v && !parse_bool(v, &b)) {
      fprintf(stderr, "shard-opt: --%s expects true or false, got '%s'\n", kFlags[id].name, v);
      return false;
    }
    return set_bool(o, id, b);
  }
  }
}

// One flag at argv[*i] (its name and value after the dashes in `body`).
// Returns false on a usage error (printed).
static bool parse_flag(int argc, char **argv, int *i, const char *body, options *o,
                       int *seen) {
  const char *arg = argv[*i];
  size_t name_len = strcspn(body, "=");
  const char *v = body[name_len] == '=' ? body + name_len + 1 : NULL;
  flag_id id = find_flag(body, name_len);
  if (id == F_COUNT && arg[1] != '-' && body[0] == 'o' && body[1] && body[1] != '=') {
    id = F_OUTPUT; // -oFILE
    v = body + 1;
  }
  if (id == F_COUNT) { // a pass, checked when the pass manager is built
    o->pass_flags[o->num_pass_flags] = body;
    o->pass_args[o->num_pass_flags++] = arg;
    return true;
  }
  if (seen[id]++) {
    fprintf(stderr, "shard-opt: %s given twice (a flag takes one value)\n", arg);
    return false;
  }
  if (kFlags[id].kind == F_VALUE && !v) {
    if (*i + 1 >= argc) {
      fprintf(stderr, "shard-opt: %s needs a value\n", arg);
      return false;
    }
    v = argv[++*i];
  }
  return apply(o, id, arg, v);
}

// The checks across flags, once all are read.
static int check(options *o) {
  if ((o->tp_size > 1 || o->dp_size > 1 || o->cp_size > 1 || o->sequence_parallel ||
       o->dp_replicate || o->report) &&
      !o->tp_plan) {
    fprintf(stderr, "shard-opt: --tp-size, --dp-size, --cp-size, --sequence-parallel, "
                    "--dp-replicate and --report need --tp-plan=NAME|FILE\n");
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
                    "flags such as '%s'\n", o->pass_args[0]);
    return 1;
  }
  return 0;
}

int opt_parse(int argc, char **argv, options *o) {
  *o = (options){.input = "-", .output = "-", .verify_each = true, .tp_size = 1,
                 .dp_size = 1, .cp_size = 1};
  o->pass_flags = calloc((size_t)argc, sizeof(char *));
  o->pass_args = calloc((size_t)argc, sizeof(char *));
  if (!o->pass_flags || !o->pass_args) {
    fprintf(stderr, "shard-opt: out of memory\n");
    return 1;
  }
  bool have_input = false, flags_done = false;
  int seen[F_COUNT] = {0};
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!flags_done && (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "-help")))
      return -1;
    if (!flags_done && !strcmp(a, "--")) {
      flags_done = true;
    } else if (!flags_done && a[0] == '-' && a[1]) {
      const char *body = a + (a[1] == '-' ? 2 : 1);
      if (!body[0] || body[0] == '-' || body[0] == '=') {
        fprintf(stderr, "shard-opt: unknown option '%s' (see --help)\n", a);
        return 1;
      }
      if (!parse_flag(argc, argv, &i, body, o, seen))
        return 1;
    } else if (have_input) {
      fprintf(stderr, "shard-opt: more than one input file: '%s' and '%s'\n", o->input, a);
      return 1;
    } else {
      o->input = a;
      have_input = true;
    }
  }
  return check(o);
}

void opt_print_help(void) {
  printf(
      "OVERVIEW: shard-opt: the nn dialect and tensor-parallel passes, on MLIR 22\n\n"
      "USAGE: shard-opt [options] [input file, default -]\n\n"
      "Every flag takes one dash or two (-inline = --inline); a flag with a value\n"
      "takes it as --flag=VALUE or --flag VALUE; a BOOL flag as --flag (true) or\n"
      "--flag=true|false; '--' ends the flags.\n\n"
      "OPTIONS:\n"
      "  -o FILE                      Write output to FILE (default: stdout)\n"
      "  --pass-pipeline=TEXT         Run TEXT, e.g. 'builtin.module(func.func(nn-verify))';\n"
      "                               our passes and upstream ones mix freely\n"
      "  --PASS[=\"k=v ...\"]           Run one pass (ours below, or an upstream one)\n"
      "                               (one restricted to an op, e.g. gpu.module, runs\n"
      "                               nested under it, as in mlir-opt)\n"
      "  --split-input-file           Process each '// -----' chunk separately\n"
      "  --verify-diagnostics[=all|only-expected]\n"
      "                               Check the diagnostics against the input's\n"
      "                               'expected-error {{...}}' comments (also -warning,\n"
      "                               -note, -remark; @+N, @-N, @above, @below, @unknown;\n"
      "                               -re for {{regex}} parts), as mlir-opt does; the\n"
      "                               exit status is the check's\n"
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
      "  --cp-size=C                  Context-parallel size: the mesh is dp x cp x tp\n"
      "                               (default 1; larger sizes are refused: not\n"
      "                               implemented yet)\n"
      "  --sequence-parallel          Use the plan's sequence-parallel variant\n"
      "  --dp-replicate               Replicate parameters over dp (default with dp > 1:\n"
      "                               FSDP, each parameter's dim 0 sharded over dp)\n"
      "  --report                     Print per-rank memory and collective traffic (and a\n"
      "                               training step's buffer plan)\n"
      "  -h, --help                   This help\n\n"
      "Diagnostics are printed as mlir-opt prints them: file:line:col, the source\n"
      "line, a caret under the column.\n\n"
      "OUR PASSES:\n");
  int n;
  const tp_pass_info *const *passes = tp_pass_list(&n);
  for (int i = 0; i < n; ++i) {
    printf("  --%-26s %s\n", passes[i]->argument, passes[i]->summary);
    for (int j = 0; j < passes[i]->num_options; ++j)
      printf("      %s=<%s>  %s\n", passes[i]->options[j].name,
             passes[i]->options[j].default_value, passes[i]->options[j].help);
  }
  // The counts are LLVM 22.1's, as bench/upstream_passes.sh measures them
  // (each pass mlir-opt-22 --help lists, tried as a flag);
  // test/shard-opt/help.test checks samples of both kinds.
  printf("\nUPSTREAM PASSES:\n"
         "  Accepted: every pass the MLIR C API registers (mlirRegisterAllPasses), that\n"
         "  is every pass of MLIR's libraries: 293 of the 494 that mlir-opt 22 --help\n"
         "  lists (canonicalize, cse, inline, sharding-propagation, shard-partition, ...).\n"
         "  Not accepted: the other 201, mlir-opt's test passes from MLIR's test library,\n"
         "  which the C API does not register (test-grid-simplifications,\n"
         "  test-grid-resharding-partition, test-single-fold, ...; every such name\n"
         "  contains 'test'). They are refused as not registered.\n");
}
