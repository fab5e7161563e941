// srt_context_destroy: the teardown, above both the context (context.c) and
// the collectives (collectives.c). Collectives still in flight (a step that
// failed between a start and its wait) are waited for first, against the
// deadline (or kTeardownGrace without one): MPI may still write their
// buffers. Then the context releases what it holds. Living here, neither the
// context needs the collectives nor the reverse (no include cycle).
#include "context_internal.h"

#include "shardrt/collectives.h"

// Seconds a teardown waits for collectives in flight when the context has
// no deadline (--timeout 0).
enum { kTeardownGrace = 60 };

srt_status srt_context_destroy(srt_context *ctx) {
  if (!ctx)
    return NULL;
  if (ctx->timeout_s <= 0) // no deadline: a grace period, not a hang
    ctx->timeout_s = kTeardownGrace;
  srt_status stuck = NULL;
  for (int i = 0; i < SRT_MAX_PENDING && !stuck; ++i) // one deadline at most
    stuck = srt_collective_wait(ctx, i);
  return srt_context_release(ctx, stuck);
}
