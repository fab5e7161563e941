// shard-tokens: turns any file into byte-level training tokens (one token
// per byte, vocabulary 256) in the runtime's token format (docs/data.md).
//   shard-tokens INPUT -o OUTPUT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardrt/output.h"
#include "shardrt/tokens.h"

// Prints the problem (if any) and the usage; returns the exit status 1.
static int usage(const char *problem, const char *word) {
  if (problem)
    fprintf(stderr, "shard-tokens: %s '%s'\n", problem, word);
  fprintf(stderr, "usage: shard-tokens INPUT -o OUTPUT\n"
                  "  writes one token per byte of INPUT (vocabulary 256)\n");
  return 1;
}

int main(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: shard-tokens INPUT -o OUTPUT\n"
             "  writes one token per byte of INPUT (vocabulary 256); docs/data.md\n");
      return 0;
    }
    if (!strcmp(argv[i], "-o") && out) {
      fprintf(stderr, "shard-tokens: -o given twice ('%s' and '%s')\n", out,
              i + 1 < argc ? argv[i + 1] : "");
      return 1;
    }
    if (!strcmp(argv[i], "-o") && i + 1 < argc)
      out = argv[++i];
    else if (!strcmp(argv[i], "-o"))
      return usage("-o needs a value:", "-o");
    else if (argv[i][0] == '-' && argv[i][1])
      return usage("unknown flag", argv[i]);
    else if (!in)
      in = argv[i];
    else
      return usage("a second input", argv[i]);
  }
  if (!in)
    return usage("no input given: expected", "INPUT");
  if (!out)
    return usage("no output given: expected", "-o OUTPUT");
  if (!*in || !*out)
    return usage("empty path for", !*in ? "INPUT" : "-o");
  // The input is read whole: a regular file only (a FIFO or a device such
  // as /dev/zero would never end); the output must not be the input.
  struct stat st;
  if (stat(in, &st) != 0) {
    fprintf(stderr, "shard-tokens: '%s': %s\n", in, strerror(errno));
    return 1;
  }
  if (!S_ISREG(st.st_mode)) {
    fprintf(stderr, "shard-tokens: input '%s' is not a regular file\n", in);
    return 1;
  }
  if (st.st_size == 0) { // no model trains on it: a wrong file, not a corpus
    fprintf(stderr, "shard-tokens: input '%s' is empty: no tokens to write\n", in);
    return 1;
  }
  if (srt_same_file(in, out)) {
    fprintf(stderr, "shard-tokens: output '%s' is the input: give another file\n", out);
    return 1;
  }
  // Non-blocking: should the input have become a FIFO since the stat, the
  // open does not wait for a writer (and the fstat refuses it).
  int fd = open(in, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  FILE *f = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "rb") : NULL;
  if (!f) {
    fprintf(stderr, "shard-tokens: cannot read '%s': %s\n", in,
            fd < 0 ? strerror(errno) : "not a regular file");
    if (fd >= 0)
      close(fd);
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
