// shard-tokens: turns any file into byte-level training tokens (one token
// per byte, vocabulary 256) in the runtime's token format (docs/data.md).
//   shard-tokens INPUT -o OUTPUT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/tokens.h"

static int usage(void) {
  fprintf(stderr, "usage: shard-tokens INPUT -o OUTPUT\n"
                  "  writes one token per byte of INPUT (vocabulary 256)\n");
  return 1;
}

int main(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc)
      out = argv[++i];
    else if (argv[i][0] == '-' && argv[i][1])
      return usage();
    else if (!in)
      in = argv[i];
    else
      return usage();
  }
  if (!in || !out)
    return usage();
  FILE *f = fopen(in, "rb");
  if (!f) {
    perror(in);
    return 1;
  }
  size_t cap = 1 << 16, n = 0;
  int64_t *tokens = malloc(cap * sizeof *tokens);
  int c;
  while (tokens && (c = fgetc(f)) != EOF) {
    if (n == cap) {
      int64_t *grown = realloc(tokens, 2 * cap * sizeof *tokens);
      if (!grown) {
        free(tokens);
        tokens = NULL;
        break;
      }
      tokens = grown;
      cap *= 2;
    }
    tokens[n++] = c;
  }
  int read_error = ferror(f);
  fclose(f);
  if (!tokens || read_error) {
    fprintf(stderr, "shard-tokens: %s: %s\n", in, tokens ? "read error" : "out of memory");
    free(tokens);
    return 1;
  }
  srt_status s = srt_tokens_write(out, tokens, (int64_t)n, 256);
  free(tokens);
  if (s) {
    fprintf(stderr, "shard-tokens: %s\n", srt_status_message(s));
    srt_status_free(s);
    return 1;
  }
  printf("shard-tokens: %zu tokens (vocabulary 256) from '%s' to '%s'\n", n, in, out);
  return 0;
}
