// shard-compile's tokenizer.json check (tokenizer.h).
#include "tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// A tokenizer.json is a few MiB (Qwen2's 7 MiB, Gemma 3's 33 MiB); this
// bounds a wrong file.
enum { kMaxTokenizerBytes = 256 << 20 };

// The largest token id `root` defines, or -1 for none: model.vocab (BPE,
// WordPiece, WordLevel: an object of ids; Unigram: an array, ids by
// position) and added_tokens[].id.
static int64_t largest_id(const json_t *root) {
  int64_t top = -1;
  const json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
  const char *key;
  const json_t *v;
  if (json_is_object(vocab))
    json_object_foreach((json_t *)vocab, key, v) {
      if (json_is_integer(v) && json_integer_value(v) > top)
        top = json_integer_value(v);
    }
  if (json_is_array(vocab))
    top = (int64_t)json_array_size(vocab) - 1;
  size_t i;
  json_array_foreach(json_object_get(root, "added_tokens"), i, v) {
    const json_t *id = json_object_get(v, "id");
    if (json_is_integer(id) && json_integer_value(id) > top)
      top = json_integer_value(id);
  }
  return top;
}

bool compile_tokenizer_read(const char *config_path, int64_t vocab, char **text, size_t *len,
                            char *err, size_t errlen) {
  *text = NULL;
  *len = 0;
  char path[4096];
  const char *slash = strrchr(config_path, '/');
  int n = slash ? snprintf(path, sizeof path, "%.*s/tokenizer.json", (int)(slash - config_path),
                           config_path)
                : snprintf(path, sizeof path, "tokenizer.json");
  struct stat st;
  if (n < 0 || n >= (int)sizeof path || stat(path, &st) != 0)
    return true; // none beside the config: an export writes none
  FILE *f = S_ISREG(st.st_mode) && st.st_size <= kMaxTokenizerBytes ? fopen(path, "rb") : NULL;
  char *buf = f ? malloc((size_t)st.st_size + 1) : NULL;
  size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
  if (f)
    fclose(f);
  if (!buf || got != (size_t)st.st_size) {
    free(buf);
    snprintf(err, errlen, "shard-compile: '%s' (beside the config) cannot be read%s", path,
             !S_ISREG(st.st_mode)                 ? ": not a regular file"
             : st.st_size > kMaxTokenizerBytes ? ": larger than 256 MiB"
                                                  : "");
    return false;
  }
  buf[got] = 0;
  json_error_t je;
  json_t *root = json_loadb(buf, got, 0, &je);
  if (!json_is_object(root)) {
    snprintf(err, errlen, "shard-compile: '%s' (beside the config) is not a JSON object%s%s",
             path, root ? "" : ": ", root ? "" : je.text);
    json_decref(root);
    free(buf);
    return false;
  }
  int64_t top = largest_id(root);
  json_decref(root);
  if (top >= vocab) {
    snprintf(err, errlen,
             "shard-compile: '%s' (beside the config) holds token id %lld, past the config's "
             "vocab_size %lld: a tokenizer of %lld ids does not fit this model's embedding",
             path, (long long)top, (long long)vocab, (long long)top + 1);
    free(buf);
    return false;
  }
  *text = buf;
  *len = got;
  return true;
}
