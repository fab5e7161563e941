// How a model's tensors are named in its checkpoints. A compiled program
// names parameters as transformers' modules do in memory
// ("model.language_model.layers.0..." for Gemma3ForConditionalGeneration);
// checkpoints on disk may use another layout of the same names (that
// model's "language_model.model.layers.0...", which transformers 4.x and
// 5.x both write), and may hold tensors of modules the program does not
// train (its vision tower), which are carried through a save untouched.
//
// The program describes this as text (srt_program.checkpoint_names), one
// directive per line:
//   carry PREFIX              in-memory prefix of tensors to carry through
//   layout MEM=DISK ...       an alternative layout: a name starting with
//                             MEM is stored with DISK in its place (the
//                             first matching pair applies; names matching
//                             none are stored as they are)
// The in-memory layout itself is layout 0 and is not written.
// Source of the Gemma3 layouts: transformers' conversion_mapping.py
// ("llava" renamings, which gemma3 uses).
#ifndef SHARDRT_CHECKPOINT_NAMES_H
#define SHARDRT_CHECKPOINT_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "shardrt/status.h"

#define SRT_MAX_LAYOUTS 4          ///< layouts besides the in-memory one
#define SRT_MAX_RENAMES 8          ///< prefix pairs per layout
#define SRT_MAX_CARRIED 8          ///< carried prefixes
#define SRT_NAME_PREFIX_LEN 96     ///< longest prefix, with its NUL

typedef struct srt_name_rename {
  char mem[SRT_NAME_PREFIX_LEN];
  char disk[SRT_NAME_PREFIX_LEN];
} srt_name_rename;

typedef struct srt_checkpoint_names {
  int num_layouts; ///< layouts 1..num_layouts (0 is the in-memory one)
  struct {
    int num_renames;
    srt_name_rename renames[SRT_MAX_RENAMES];
  } layouts[SRT_MAX_LAYOUTS + 1];
  int num_carried;
  char carried[SRT_MAX_CARRIED][SRT_NAME_PREFIX_LEN];
} srt_checkpoint_names;

/// Parses `text` (NULL or "" for none: one layout, nothing carried) into
/// *out. Errors: SRT_INVALID_ARGUMENT naming the line: an unknown
/// directive, a pair without '=', an empty or too long prefix, more
/// layouts, pairs or carried prefixes than the limits above.
srt_status srt_checkpoint_names_parse(const char *text, srt_checkpoint_names *out);

/// The stored name of in-memory `name` under `layout`, into buf[len].
/// Returns false when it does not fit.
bool srt_checkpoint_name_stored(const srt_checkpoint_names *n, int layout, const char *name,
                                char *buf, size_t len);

/// The in-memory name of `stored` under `layout` (the inverse), into
/// buf[len]. Returns false when it does not fit.
bool srt_checkpoint_name_in_memory(const srt_checkpoint_names *n, int layout,
                                   const char *stored, char *buf, size_t len);

/// Whether in-memory `name` belongs to a carried module.
bool srt_checkpoint_name_carried(const srt_checkpoint_names *n, const char *name);

#endif // SHARDRT_CHECKPOINT_NAMES_H
