/* blst_shim.c - the C side of bench/msm_vs_blst.py: blst's Pippenger MSMs on T threads, and
 * distinct BLS12-381 points to run them on.
 *
 * Built by the bench against libblst.a (supranational/blst, compiled from its sources with
 * its own build.sh). Points are blst_p1_affine / blst_p2_affine, whose memory layout (each
 * coordinate Montgomery form, R = 2^384, six little-endian 64-bit limbs; Fp2 = c0 then c1;
 * infinity all zeros) is also zkqueue's "LEM" encoding, so the same buffers feed both
 * libraries without conversion; the bench checks the results are equal.
 *
 * Threads: blst's C API is single-threaded; its Rust binding (bindings/rust/src/pippenger.rs,
 * MultiPoint::mult) splits the scalar bits into `ny` windows of `wnd` bits ("breakdown"),
 * lets a pool of threads pull windows from a counter and run blst_pXs_tile_pippenger on each,
 * then folds the windows with doublings. mult_p1/mult_p2 below do exactly that with pthreads
 * (nx = 1, the case the binding picks whenever nbits > window * threads, as it does for
 * 255-bit scalars on 2 threads), so the peer is blst as its own multi-threaded binding runs it.
 * threads == 1 calls blst_pXs_mult_pippenger itself.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blst.h"

static size_t num_bits(size_t n) { size_t b = 0; while (n) { n >>= 1; b++; } return b; }

/* pippenger.rs: pippenger_window_size */
static size_t window_size(size_t npoints) {
    size_t w = num_bits(npoints);
    if (w > 13) return w - 4;
    if (w > 5) return w - 3;
    return 2;
}

/* pippenger.rs: breakdown() for the nx == 1 branch (nbits > window * ncpus); returns 0 when the
 * binding would split the points too (not used by this bench's sizes). */
static int breakdown(size_t nbits, size_t window, size_t ncpus, size_t *ny, size_t *wnd) {
    if (nbits <= window * ncpus) return 0;
    size_t w = num_bits(ncpus / 4);
    if (window + w > 18) {
        w = window - w;
    } else {
        w = (nbits / window + ncpus - 1) / ncpus;
        w = ((nbits / (window + 1) + ncpus - 1) / ncpus < w) ? window + 1 : window;
    }
    *ny = nbits / w + 1;
    *wnd = nbits / *ny + 1;
    return 1;
}

typedef struct {
    int g2;
    const void *points;
    const uint8_t *scalars;
    size_t npoints, nbits, ny, wnd;
    void *grid;           /* ny blst_p1 or blst_p2 */
    atomic_size_t next;
} job_t;

static void *worker(void *arg) {
    job_t *job = arg;
    size_t xyzz = job->g2 ? blst_p2s_mult_pippenger_scratch_sizeof(0) : blst_p1s_mult_pippenger_scratch_sizeof(0);
    void *scratch = calloc(1, xyzz << (job->wnd - 1));  /* tile_pippenger wants zeroed buckets */
    if (!scratch) return (void *)1;
    const void *pts[2] = {job->points, NULL};
    const uint8_t *scs[2] = {job->scalars, NULL};
    for (;;) {
        size_t y = atomic_fetch_add(&job->next, 1);
        if (y >= job->ny) break;
        if (job->g2)
            blst_p2s_tile_pippenger((blst_p2 *)job->grid + y, (const blst_p2_affine *const *)pts, job->npoints,
                                    scs, job->nbits, scratch, y * job->wnd, job->wnd);
        else
            blst_p1s_tile_pippenger((blst_p1 *)job->grid + y, (const blst_p1_affine *const *)pts, job->npoints,
                                    scs, job->nbits, scratch, y * job->wnd, job->wnd);
    }
    free(scratch);
    return NULL;
}

/* sum scalars[i] * points[i]; scalars are 32-byte little-endian, `nbits` significant bits.
 * Writes the affine result to out (blst_p1_affine / blst_p2_affine). Returns 0 or -1. */
static int mult(int g2, void *out, const void *points, const uint8_t *scalars, size_t npoints, size_t nbits,
                int threads) {
    const void *pts[2] = {points, NULL};
    const uint8_t *scs[2] = {scalars, NULL};
    size_t ny, wnd;
    if (threads <= 1 || npoints < 32 || !breakdown(nbits, window_size(npoints), (size_t)threads, &ny, &wnd)) {
        if (threads > 1 && npoints >= 32) return -1;  /* a split this shim does not do */
        size_t sz = g2 ? blst_p2s_mult_pippenger_scratch_sizeof(npoints) : blst_p1s_mult_pippenger_scratch_sizeof(npoints);
        void *scratch = malloc(sz);
        if (!scratch) return -1;
        if (g2) {
            blst_p2 r;
            blst_p2s_mult_pippenger(&r, (const blst_p2_affine *const *)pts, npoints, scs, nbits, scratch);
            blst_p2_to_affine(out, &r);
        } else {
            blst_p1 r;
            blst_p1s_mult_pippenger(&r, (const blst_p1_affine *const *)pts, npoints, scs, nbits, scratch);
            blst_p1_to_affine(out, &r);
        }
        free(scratch);
        return 0;
    }
    job_t job = {g2, points, scalars, npoints, nbits, ny, wnd, NULL, 0};
    job.grid = malloc(ny * (g2 ? sizeof(blst_p2) : sizeof(blst_p1)));
    pthread_t tid[64];
    if (!job.grid || threads > 64) { free(job.grid); return -1; }
    int started = 0, failed = 0;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&tid[t], NULL, worker, &job) == 0) started = t; else break;
    }
    failed |= worker(&job) != NULL;
    for (int t = 1; t <= started; t++) { void *rv; pthread_join(tid[t], &rv); failed |= rv != NULL; }
    if (failed) { free(job.grid); return -1; }
    /* fold the windows, top first: ret = ret * 2^wnd + grid[y] (pippenger.rs does the same) */
    if (g2) {
        blst_p2 *grid = job.grid, r = grid[ny - 1];
        for (size_t y = ny - 1; y-- > 0;) {
            for (size_t i = 0; i < wnd; i++) blst_p2_double(&r, &r);
            blst_p2_add_or_double(&r, &r, &grid[y]);
        }
        blst_p2_to_affine(out, &r);
    } else {
        blst_p1 *grid = job.grid, r = grid[ny - 1];
        for (size_t y = ny - 1; y-- > 0;) {
            for (size_t i = 0; i < wnd; i++) blst_p1_double(&r, &r);
            blst_p1_add_or_double(&r, &r, &grid[y]);
        }
        blst_p1_to_affine(out, &r);
    }
    free(job.grid);
    return 0;
}

int shim_mult_p1(blst_p1_affine *out, const blst_p1_affine *points, const uint8_t *scalars, size_t npoints,
                 size_t nbits, int threads) {
    return mult(0, out, points, scalars, npoints, nbits, threads);
}

int shim_mult_p2(blst_p2_affine *out, const blst_p2_affine *points, const uint8_t *scalars, size_t npoints,
                 size_t nbits, int threads) {
    return mult(1, out, points, scalars, npoints, nbits, threads);
}

/* n distinct points P_i = k0*G + i*(k1*G) (k0, k1: 32-byte little-endian scalars), affine. */
int shim_points_p1(blst_p1_affine *out, size_t n, const uint8_t k0[32], const uint8_t k1[32]) {
    blst_p1 *jac = malloc(n * sizeof(blst_p1)), step, acc;
    if (!jac) return -1;
    blst_p1_mult(&acc, blst_p1_generator(), k0, 255);
    blst_p1_mult(&step, blst_p1_generator(), k1, 255);
    for (size_t i = 0; i < n; i++) { jac[i] = acc; blst_p1_add_or_double(&acc, &acc, &step); }
    const blst_p1 *ptrs[2] = {jac, NULL};
    blst_p1s_to_affine(out, ptrs, n);
    free(jac);
    return 0;
}

int shim_points_p2(blst_p2_affine *out, size_t n, const uint8_t k0[32], const uint8_t k1[32]) {
    blst_p2 *jac = malloc(n * sizeof(blst_p2)), step, acc;
    if (!jac) return -1;
    blst_p2_mult(&acc, blst_p2_generator(), k0, 255);
    blst_p2_mult(&step, blst_p2_generator(), k1, 255);
    for (size_t i = 0; i < n; i++) { jac[i] = acc; blst_p2_add_or_double(&acc, &acc, &step); }
    const blst_p2 *ptrs[2] = {jac, NULL};
    blst_p2s_to_affine(out, ptrs, n);
    free(jac);
    return 0;
}
