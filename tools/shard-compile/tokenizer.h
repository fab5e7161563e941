// The tokenizer.json beside the compiled config: read and checked at
// compile time, its bytes embedded in the program (srt_program.
// tokenizer_json), so that --export writes the tokenizer the model was
// compiled with, wherever the binary runs and whatever lies beside the
// config later.
#ifndef SHARD_COMPILE_TOKENIZER_H
#define SHARD_COMPILE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Reads "tokenizer.json" from the folder of `config_path` into *text
/// (malloc'ed, NUL-terminated, *len bytes; NULL when there is none) and
/// checks that every token id it defines (model.vocab's, added_tokens')
/// is below `vocab` (the config's vocab_size). Returns false with a message
/// in err[errlen] naming the file when it cannot be read, is not JSON, or
/// holds an id the model cannot embed (both numbers).
bool compile_tokenizer_read(const char *config_path, int64_t vocab, char **text, size_t *len,
                            char *err, size_t errlen);

#endif
