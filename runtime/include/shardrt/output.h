// Where a file may be written. Outputs are written to a temporary file and
// renamed over the path (so a crash never leaves half a file) — but only
// where the path is new or a regular file: a character device (/dev/null,
// a terminal) is written directly, and anything else (a directory, FIFO,
// socket, block device) is refused, so no write ever replaces a device
// node or blocks on a pipe nobody reads. A symbolic link is written
// through: the temporary goes beside the file it resolves to and is
// renamed over that file, so the link stays. "-", and a path naming the
// file standard output is open on (/dev/stdout), is standard output,
// written directly.
#ifndef SHARDRT_OUTPUT_H
#define SHARDRT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "shardrt/status.h"

/// What a staged write appends to the file it replaces: mkstemp(3) fills
/// the X's, so two writers of one path never share a temporary.
#define SRT_OUTPUT_TEMP_SUFFIX ".tmp.XXXXXX"

/// How `path` is written.
typedef enum srt_output_kind {
  SRT_OUTPUT_FILE,   ///< new or a regular file: temporary + rename (+ fsync)
  SRT_OUTPUT_DEVICE, ///< an existing character device: written in place
} srt_output_kind;

/// The kind of output `path` is (a symbolic link by what it points to).
/// `what` names the output in messages ("token file", "--save").
/// Errors: SRT_INVALID_ARGUMENT naming `what`, the path and what it is, for
/// a directory, FIFO, socket or block device; SRT_IO when it cannot be
/// examined (other than not existing).
srt_status srt_output_kind_of(const char *what, const char *path, srt_output_kind *kind);

/// Checks that the files written for output `path` fit the system's name
/// limits: `path` itself and the names made by appending up to
/// `suffix_bytes` to it (a temporary "<path>.tmp.XXXXXX", a checkpoint's
/// optimizer file "<path>.optim-<step>-<n>.tmp.XXXXXX"). Errors: SRT_INVALID_ARGUMENT naming
/// `what` and the lengths, when the last component would exceed NAME_MAX
/// (255) or the whole path PATH_MAX (4096) - checked before any work, so a
/// run does not fail only when it saves.
srt_status srt_output_check_name(const char *what, const char *path, size_t suffix_bytes);

/// True when `a` and `b` both exist and are the same file (device and inode:
/// other spellings and hard links included). "-" stands for the file
/// standard output is open on, so an output of "-" redirected onto an input
/// is caught.
bool srt_same_file(const char *a, const char *b);

/// True when `path` is "-" or names the file standard output is open on
/// (/dev/stdout, /dev/fd/1, or the file it was redirected to): such an
/// output is written to standard output in place, so a redirection with >>
/// appends and nothing replaces the file under the shell.
bool srt_output_is_stdout(const char *path);

/// Refuses `path` as the output of a file that is rewritten in place after
/// its data (a safetensors file's checksums) or made by another program
/// that replaces it (the linker making an executable) when it is standard output ("-",
/// /dev/stdout) other than a character device: a pipe cannot seek and a
/// redirected file must not be replaced under the shell. /dev/null and a
/// terminal pass. Errors: SRT_INVALID_ARGUMENT naming `what` and `path`.
srt_status srt_output_check_seekable(const char *what, const char *path);

/// The file a staged write of `path` replaces, in `*dest` (to free()): for
/// an existing symbolic link, the file it resolves to (every link followed,
/// realpath(3)), so the temporary and the rename go there and the link
/// stays; `path` itself otherwise, a dangling link included (it is replaced
/// by the file, nothing is created where it points).
/// Errors: SRT_INVALID_ARGUMENT naming `what` and `path` for a link whose
/// target exists but cannot be named (a deleted file behind a /proc fd
/// link, a target path past PATH_MAX); SRT_RESOURCE_EXHAUSTED.
srt_status srt_output_destination(const char *what, const char *path, char **dest);

/// Creates an empty temporary for a write of `dest` beside it, exclusively
/// (mkstemp: "<dest>.tmp.XXXXXX", a name no other process holds, so two
/// jobs writing one path never write into each other's file), with the
/// mode bits a plain create gives (0666 less the umask), and returns its
/// name in `*tmp` (to free(); NULL on error). Errors: SRT_IO naming `what`,
/// the temporary and the OS error (nothing is left); SRT_RESOURCE_EXHAUSTED.
srt_status srt_output_temp(const char *what, const char *dest, char **tmp);

/// Where a write of `path` (not standard output) goes: `*dest`, the file it
/// replaces (srt_output_destination), and `*tmp`, the file to write now:
/// a new empty temporary beside it (srt_output_temp), to be renamed over
/// `dest` once complete or unlinked by the caller on failure; for a
/// character device both are `path`, nothing is created and `*device` is
/// true (written in place). Both strings are to free(); NULL on error.
/// Errors: those of srt_output_kind_of, srt_output_destination,
/// srt_output_check_name (`dest` with SRT_OUTPUT_TEMP_SUFFIX) and
/// srt_output_temp; SRT_RESOURCE_EXHAUSTED.
srt_status srt_output_stage(const char *what, const char *path, bool *device, char **dest,
                            char **tmp);

/// Writes `len` bytes of `data` to `path` as its kind says (a new or regular
/// file, or a link to one: a unique "<file>.tmp.XXXXXX" beside srt_output_destination's
/// file, flock(2)ed while written, fsync, rename over it; a character device: in place; "-" or the
/// file standard output is open on: standard output, flushed), so a crash
/// never leaves half a file. `what` names the output in messages.
/// Errors: those of srt_output_stage; SRT_IO naming `what`, the file and
/// the OS error (the temporary is removed).
srt_status srt_write_file(const char *what, const char *path, const void *data, size_t len);

#endif // SHARDRT_OUTPUT_H
