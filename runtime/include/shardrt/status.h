// srt_status: the one result type of every fallible runtime call (after
// IREE's iree_status_t): NULL means success; otherwise a heap object with a
// code, the file and line that raised it, and a message naming the tensor,
// rank and values involved. The library never calls exit().
#ifndef SHARDRT_STATUS_H
#define SHARDRT_STATUS_H

#include <stddef.h>

typedef enum srt_code {
  SRT_OK = 0,
  SRT_INVALID_ARGUMENT,  // the caller passed something impossible
  SRT_OUT_OF_RANGE,      // an index or offset past a bound
  SRT_NOT_FOUND,         // a named tensor, file or key is missing
  SRT_DATA_LOSS,         // a file is malformed or truncated
  SRT_IO,                // the OS refused a read, write, mmap or rename
  SRT_RESOURCE_EXHAUSTED,// out of memory or arena space
  SRT_FAILED_PRECONDITION, // e.g. world size != dp x tp
  SRT_UNAVAILABLE,       // a collective or communicator failed
  SRT_INTERNAL,          // a bug in the runtime
  SRT_DEADLINE_EXCEEDED, // a collective did not complete in time (a peer stalled or died)
} srt_code;

/// NULL = OK. Owned by whoever receives it: free with srt_status_free or
/// pass it up.
typedef struct srt_status_object *srt_status;

/// Creates a status with a printf-style message. Never returns NULL for a
/// code other than SRT_OK (falls back to a static out-of-memory status).
srt_status srt_status_make(srt_code code, const char *file, int line,
                           const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/// The code of `s` (SRT_OK for NULL).
srt_code srt_status_code(srt_status s);

/// The message of `s` ("" for NULL); valid until srt_status_free(s).
const char *srt_status_message(srt_status s);

/// "file:line: CODE: message" into buf (size len); returns buf.
const char *srt_status_format(srt_status s, char *buf, unsigned long len);

/// The name of a code, e.g. "DATA_LOSS".
const char *srt_code_name(srt_code code);

/// Returns `s` with the context formatted from `fmt` (printf-style) appended
/// to its message once, in parentheses: "message (context)", e.g. the rank
/// or the group an error happened on. The code, file and line stay those of
/// the site that raised it. Call it once where the context is known (the op
/// dispatcher, a collective's group) instead of formatting the context by
/// hand at each error site.
///
/// `rank` is the world rank the context names, or -1 when it names none. A
/// status names at most one rank: when `rank` >= 0 and `s` already names one
/// (a deeper call added it, with more detail), `s` is returned unchanged.
///
/// Takes ownership of `s` (freed or returned); NULL returns NULL. When the
/// annotated copy cannot be allocated, returns `s` without the context (the
/// error itself is never lost).
srt_status srt_status_annotate(srt_status s, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/// The world rank the context of `s` names (see srt_status_annotate), -1
/// when none does or `s` is NULL.
int srt_status_rank(srt_status s);

/// Frees `s`; NULL is fine.
void srt_status_free(srt_status s);

/// Raises an error at the current file and line.
#define SRT_ERROR(code, ...) srt_status_make((code), __FILE__, __LINE__, __VA_ARGS__)

/// Returns the status of `expr` from the enclosing function if it failed.
#define SRT_RETURN_IF_ERROR(expr)                                              \
  do {                                                                         \
    srt_status srt_status_tmp_ = (expr);                                       \
    if (srt_status_tmp_)                                                       \
      return srt_status_tmp_;                                                  \
  } while (0)

#endif // SHARDRT_STATUS_H
