// Strict reading of command-line flags and values, shared by the tools
// (tools/common/args.h prints their messages) and the training driver
// (runtime/train/options.c turns them into statuses). Nothing here prints.
#ifndef SHARDRT_ARGS_H
#define SHARDRT_ARGS_H

#include <stdbool.h>
#include <stdint.h>

/// The entry of `flags` that argument `arg` spells, or -1. `flags` is a
/// NULL-terminated table (at most `n` entries read) whose entries list a
/// flag's spellings separated by '|' (e.g. "-o|--output"); `arg` is a flag
/// position: "--name", "--name=value", "-o" or "-oFILE", compared up to its
/// '=' (a short flag also with its value attached).
int srt_args_find(const char *const *flags, int n, const char *arg);

/// The value attached to a long flag ("--name=value": "value", possibly
/// empty), or NULL when `arg` carries none.
const char *srt_args_attached(const char *arg);

/// Why a number was refused.
typedef enum srt_args_error {
  SRT_ARGS_OK,
  SRT_ARGS_MALFORMED, ///< not the number's spelling (spaces, '+', trailing text, empty)
  SRT_ARGS_RANGE,     ///< beyond int64_t, or beyond a double's range
} srt_args_error;

/// Parses `v` as a decimal integer: digits with an optional leading '-'
/// only (strtoll alone would take " 5", "+5" and clamp overflow).
srt_args_error srt_args_int(const char *v, int64_t *out);

/// Parses `v` as a double (strtod's spellings, but no leading space and
/// nothing after; "nan" and "inf" are numbers here, the caller decides).
srt_args_error srt_args_double(const char *v, double *out);

#endif // SHARDRT_ARGS_H
