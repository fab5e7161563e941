// shard-opt's command line: mlir-opt's spellings (one dash or two,
// `--flag=value`, `--flag value` for flags that take a value, `--PASS` and
// `--PASS="k=v ..."` for any pass), our sharding flags, and the help.
#ifndef SHARD_OPT_OPTIONS_H
#define SHARD_OPT_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

/// --verify-diagnostics: off, every diagnostic checked (`all`, the
/// default value), or only that the expected ones appear (`only-expected`).
typedef enum opt_verify { OPT_VERIFY_OFF, OPT_VERIFY_ALL, OPT_VERIFY_ONLY_EXPECTED } opt_verify;

typedef struct options {
  const char *input;
  const char *output;
  const char *pipeline;
  const char **pass_flags; // each "name" or "name=options", in order
  const char **pass_args;  // the same flags as given (for messages)
  int num_pass_flags;
  bool split_input;
  opt_verify verify_diagnostics;
  bool print_before_all, print_after_all, print_after_failure;
  bool print_debuginfo, print_generic;
  bool verify_each;
  bool allow_unregistered;
  // The sharding pipeline: nn-verify, tp-plan, tp-partition (+ shard-report).
  const char *tp_plan;
  int64_t tp_size, dp_size, cp_size;
  bool sequence_parallel, dp_replicate, report;
} options;

/// Parses argv into `o` (free o->pass_flags and o->pass_args afterwards,
/// whatever the result). Returns 0 on success, 1 on a usage error (printed
/// to stderr as "shard-opt: ..."), -1 for -h/--help.
int opt_parse(int argc, char **argv, options *o);

/// Prints the help to stdout.
void opt_print_help(void);

#endif // SHARD_OPT_OPTIONS_H
