// Helpers shared by the CPU-kernel unit tests: a seeded generator, float64
// copies of fp32 data, tolerance checks that name the first mismatch, and
// central finite differences of a float64 loss.
#ifndef SHARD_TEST_KERNEL_TESTING_H
#define SHARD_TEST_KERNEL_TESTING_H

#include <stdint.h>

/// xorshift64* generator: reproducible inputs without global state.
typedef struct test_rng {
  uint64_t state;
} test_rng;

/// A uniform float in [lo, hi).
float test_uniform(test_rng *rng, float lo, float hi);

/// Fills x[0..n) with test_uniform(rng, lo, hi).
void test_fill(float *x, int64_t n, test_rng *rng, float lo, float hi);

/// A malloc'ed float64 copy of x[0..n); aborts the test on failure.
double *test_to_double(const float *x, int64_t n);

/// calloc that fails the test instead of returning NULL.
void *kt_calloc(int64_t count, int64_t size);

/// Fails the test unless |got[i] - want[i]| <= atol + rtol * |want[i]| for
/// every i, printing the worst element and `what`.
void test_assert_close(const float *got, const double *want, int64_t n,
                       double atol, double rtol, const char *what);

/// A float64 scalar loss of the parameters x[0..n).
typedef double (*test_loss_fn)(const double *x, void *ctx);

/// grad[i] = (loss(x + h e_i) - loss(x - h e_i)) / (2 h); x is restored.
/// In float64 with h ~ 1e-6 the truncation error is O(h^2 f''') ~ 1e-12 and
/// the rounding error O(eps |loss| / h) ~ 1e-10 for O(1) losses, far below
/// every fp32 tolerance used against it.
void test_fd_gradient(test_loss_fn loss, void *ctx, double *x, int64_t n,
                      double h, double *grad);

/// Sum of a[i] * b[i] in float64 (the loss <y, r> for a fixed cotangent r).
double test_dot(const double *a, const double *b, int64_t n);

#endif // SHARD_TEST_KERNEL_TESTING_H
