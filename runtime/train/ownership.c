// What makes a checkpoint path one job's and a checkpoint one run's:
// an advisory lock beside each output a run replaces over and over
// (--save, --export), held from before step 1 to exit, and a run id
// recorded in every file of a checkpoint.
#define _GNU_SOURCE // getrandom
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardrt/collectives.h"
#include "shardrt/output.h"
#include "train_internal.h"

// Refuses what `fd` (opened on `lock`) is unless a regular file that is
// empty or holds what this driver writes there ("pid N on host H").
static srt_status not_a_lock_file(int fd, const char *flag, const char *path, const char *lock) {
  struct stat st;
  char head[5] = "";
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s '%s': its lock file '%s' is not a regular file: remove it", flag, path,
                     lock);
  if (st.st_size > 0 && (st.st_size > 4096 || pread(fd, head, 4, 0) != 4 || strcmp(head, "pid ")))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s '%s': '%s' is not a lock file of this driver (it does not start with "
                     "\"pid \"): it would be overwritten; move it away",
                     flag, path, lock);
  return NULL;
}

// Rank 0's part of train_lock: the lock file "<target>.lock", or nothing
// for a character device (written in place, nothing replaced).
static srt_status lock_on_rank0(const char *flag, const char *path, bool folder, int *fd) {
  char *dest = NULL;
  srt_output_kind kind = SRT_OUTPUT_FILE;
  if (!folder) {
    SRT_RETURN_IF_ERROR(srt_output_kind_of(flag, path, &kind));
    if (kind == SRT_OUTPUT_DEVICE)
      return NULL;
    SRT_RETURN_IF_ERROR(srt_output_destination(flag, path, &dest));
  }
  char lock[4200];
  int n = snprintf(lock, sizeof lock, "%s.lock", dest ? dest : path);
  free(dest);
  if (n < 0 || (size_t)n >= sizeof lock)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s '%s': its lock file's path is too long", flag,
                     path);
  // Not through a link, and only a file of ours: the lock file is
  // rewritten below, and a link or someone's file named like it must not be.
  int f = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
  if (f < 0)
    return SRT_ERROR(SRT_IO, "%s '%s': cannot open its lock file '%s': %s%s", flag, path, lock,
                     strerror(errno),
                     errno == ELOOP ? " (a symbolic link: the lock file must be a file of "
                                      "its own; remove the link)"
                                    : "");
  srt_status bad = not_a_lock_file(f, flag, path, lock);
  if (bad) {
    close(f);
    return bad;
  }
  if (flock(f, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char holder[256] = "";
    ssize_t got = pread(f, holder, sizeof holder - 1, 0);
    holder[got > 0 ? got : 0] = 0;
    holder[strcspn(holder, "\n")] = 0;
    close(f);
    if (err != EWOULDBLOCK)
      return SRT_ERROR(SRT_IO, "%s '%s': cannot lock '%s': %s", flag, path, lock,
                       strerror(err));
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "%s '%s' belongs to another job running now (%s; it holds '%s'): one job "
                     "at a time writes there: wait for it to end, or give another path",
                     flag, path, holder[0] ? holder : "its pid and host not yet written", lock);
  }
  // The holder's name, for the job refused next (the kernel drops the lock
  // itself when this process ends, however it ends).
  char host[256] = "?", text[400];
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = 0;
  int len = snprintf(text, sizeof text, "pid %ld on host %s\n", (long)getpid(), host);
  if (ftruncate(f, 0) != 0 || pwrite(f, text, (size_t)len, 0) != len) {
    int err = errno;
    close(f);
    return SRT_ERROR(SRT_IO, "%s '%s': cannot write its lock file '%s': %s", flag, path, lock,
                     strerror(err));
  }
  *fd = f;
  return NULL;
}

srt_status train_lock(srt_context *ctx, const char *flag, const char *path, bool folder,
                      int *fd) {
  *fd = -1;
  srt_status s = srt_context_rank(ctx) == 0 ? lock_on_rank0(flag, path, folder, fd) : NULL;
  int32_t code = (int32_t)srt_status_code(s);
  srt_status b = srt_broadcast(srt_context_group(ctx, SRT_GROUP_WORLD), &code, 1, SRT_I32, 0);
  if (b || srt_context_rank(ctx) == 0 || code == SRT_OK) {
    if (b)
      srt_status_free(s);
    return b ? b : s;
  }
  return SRT_ERROR((srt_code)code, "%s '%s': rank 0 could not take its lock (rank 0 says why)",
                   flag, path);
}

void train_unlock(int fd) {
  if (fd >= 0)
    close(fd); // releases the flock; the file stays (removing it would race a new holder)
}

bool train_run_id_valid(const char *id) {
  size_t n = 0;
  for (; id[n]; ++n)
    if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f')))
      return false;
  return n == TRAIN_RUN_ID_LEN;
}

srt_status train_run_id_mint(srt_context *ctx, char id[TRAIN_RUN_ID_LEN + 1]) {
  uint8_t raw[TRAIN_RUN_ID_LEN / 2] = {0};
  int32_t ok = 1;
  if (srt_context_rank(ctx) == 0) {
    size_t got = 0;
    while (got < sizeof raw) {
      ssize_t r = getrandom(raw + got, sizeof raw - got, 0);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    ok = got == sizeof raw;
  }
  srt_group *world = srt_context_group(ctx, SRT_GROUP_WORLD);
  SRT_RETURN_IF_ERROR(srt_broadcast(world, &ok, 1, SRT_I32, 0));
  if (!ok)
    return SRT_ERROR(SRT_IO, "rank 0 cannot draw a run id (getrandom failed)");
  SRT_RETURN_IF_ERROR(srt_broadcast(world, raw, (int64_t)sizeof raw, SRT_U8, 0));
  for (size_t i = 0; i < sizeof raw; ++i)
    snprintf(id + 2 * i, 3, "%02x", raw[i]);
  return NULL;
}
