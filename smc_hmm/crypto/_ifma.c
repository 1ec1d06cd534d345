/*
 * Montgomery arithmetic on AVX-512 IFMA (52-bit limbs), for smc_hmm.crypto.native.
 *
 * Written by hand because no maintained library offers it for our case: gmpy2/GMP have
 * no IFMA code and no multi-exponentiation, and OpenSSL's IFMA code (RSAZ) serves only
 * its own RSA moduli.  The multiplication is the "almost Montgomery multiplication" of
 * Gueron and Krasnov ("Accelerating big integer arithmetic using Intel IFMA
 * extensions", ARITH 2016): numbers of K = 8 * regs limbs of 52 bits, R = 2^(52 K) with
 * 4 M <= R, inputs and outputs < 2 M.  Nothing here depends on Python: the module is
 * loaded with ctypes (which releases the GIL for each call) and every argument is a
 * little-endian byte string of 52 * regs bytes per number.
 *
 * Functions carrying the IFMA target attribute run only after smc_ifma_supported()
 * returned 1 (the Python side checks), so the library loads on any x86-64 CPU.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* only to make the library an importable (empty) module */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MASK52 0xFFFFFFFFFFFFFULL
#define MAXREG 16 /* up to 128 limbs: moduli up to 6654 bits */
#define IFMA __attribute__((target("avx512f,avx512ifma")))

int smc_ifma_supported(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512ifma");
#else
    return 0;
#endif
}

/* the largest number of 64-bit registers of limbs this build takes */
int smc_ifma_max_regs(void) { return MAXREG; }

typedef struct {
    int regs;      /* K / 8 */
    uint64_t *m;   /* K limbs of the modulus */
    uint64_t k0;   /* -M^-1 mod 2^52 */
} modctx;

/* r = a * b / R mod M, r < 2 M for a, b < 2 M (r may alias a or b) */
IFMA static void amm(uint64_t *r, const uint64_t *a, const uint64_t *b, const modctx *ctx)
{
    const int n = ctx->regs, k = 8 * n;
    __m512i acc[MAXREG], bv[MAXREG], mv[MAXREG];
    const __m512i zero = _mm512_setzero_si512();
    for (int j = 0; j < n; j++) {
        acc[j] = zero;
        bv[j] = _mm512_loadu_si512((const void *)(b + 8 * j));
        mv[j] = _mm512_loadu_si512((const void *)(ctx->m + 8 * j));
    }
    const uint64_t b0 = b[0], m0 = ctx->m[0], k0 = ctx->k0;
    for (int i = 0; i < k; i++) {
        const uint64_t ai = a[i];
        uint64_t t0 = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(acc[0]));
        t0 += (ai * b0) & MASK52;                   /* limb 0 after adding lo(a_i b) */
        const uint64_t y = (t0 * k0) & MASK52;      /* makes limb 0 divisible by 2^52 */
        const uint64_t carry = (t0 + ((y * m0) & MASK52)) >> 52;
        const __m512i av = _mm512_set1_epi64((long long)ai);
        const __m512i yv = _mm512_set1_epi64((long long)y);
        for (int j = 0; j < n; j++) {
            acc[j] = _mm512_madd52lo_epu64(acc[j], av, bv[j]);
            acc[j] = _mm512_madd52lo_epu64(acc[j], yv, mv[j]);
        }
        /* divide by 2^52: drop limb 0 (its low 52 bits are zero), keep its carry */
        for (int j = 0; j < n - 1; j++)
            acc[j] = _mm512_alignr_epi64(acc[j + 1], acc[j], 1);
        acc[n - 1] = _mm512_alignr_epi64(zero, acc[n - 1], 1);
        acc[0] = _mm512_mask_add_epi64(acc[0], 1, acc[0], _mm512_set1_epi64((long long)carry));
        /* the high halves belong one limb up: after the shift, at the same index */
        for (int j = 0; j < n; j++) {
            acc[j] = _mm512_madd52hi_epu64(acc[j], av, bv[j]);
            acc[j] = _mm512_madd52hi_epu64(acc[j], yv, mv[j]);
        }
    }
    /* every limb is below 4 K 2^52 + K < 2^64: normalise to 52 bits */
    uint64_t tmp[8 * MAXREG];
    for (int j = 0; j < n; j++)
        _mm512_storeu_si512((void *)(tmp + 8 * j), acc[j]);
    uint64_t c = 0;
    for (int i = 0; i < k; i++) {
        const uint64_t v = tmp[i] + c;
        r[i] = v & MASK52;
        c = v >> 52;
    }
}

static void to_limbs(const uint8_t *in, int nbytes, uint64_t *out, int k)
{
    memset(out, 0, (size_t)k * sizeof(uint64_t));
    for (int i = 0; i < nbytes; i++) {
        const int pos = 8 * i, limb = pos / 52, shift = pos % 52;
        if (limb >= k)
            break;
        out[limb] |= ((uint64_t)in[i] << shift) & MASK52;
        if (shift > 44 && limb + 1 < k)
            out[limb + 1] |= (uint64_t)in[i] >> (52 - shift);
    }
}

static void from_limbs(const uint64_t *in, int k, uint8_t *out, int nbytes)
{
    for (int i = 0; i < nbytes; i++) {
        const int pos = 8 * i, limb = pos / 52, shift = pos % 52;
        uint64_t v = limb < k ? in[limb] >> shift : 0;
        if (shift > 44 && limb + 1 < k)
            v |= in[limb + 1] << (52 - shift);
        out[i] = (uint8_t)(v & 0xFF);
    }
}

/* r = r - M if r >= M, without a branch or an address that depends on r */
static void reduce_once(uint64_t *r, const uint64_t *m, int k)
{
    uint64_t diff[8 * MAXREG], borrow = 0;
    for (int i = 0; i < k; i++) {
        const uint64_t d = r[i] - m[i] - borrow;
        diff[i] = d & MASK52;
        borrow = (d >> 63) & 1; /* limbs are < 2^52: a borrow wraps the top bit */
    }
    const uint64_t keep = 0 - borrow; /* all ones: r < M, keep r */
    for (int i = 0; i < k; i++)
        r[i] = (r[i] & keep) | (diff[i] & ~keep);
}

/* acc = acc x, or acc = x while the product is still empty (*started == 0) */
IFMA static void multiply_into(uint64_t *acc, const uint64_t *x, int *started, const modctx *ctx)
{
    if (*started)
        amm(acc, acc, x, ctx);
    else {
        memcpy(acc, x, (size_t)64 * ctx->regs);
        *started = 1;
    }
}

/* the product out of the Montgomery domain, reduced below M, as width bytes (1 if empty) */
IFMA static void write_product(uint8_t *dst, int width, uint64_t *acc, int started,
                               const modctx *ctx)
{
    if (!started) {
        memset(dst, 0, (size_t)width);
        dst[0] = 1;
        return;
    }
    uint64_t one[8 * MAXREG] = {1};
    amm(acc, acc, one, ctx);
    reduce_once(acc, ctx->m, 8 * ctx->regs);
    from_limbs(acc, 8 * ctx->regs, dst, width);
}

/* bits [pos, pos + c) of a little-endian exponent of ew bytes */
static unsigned window_digit(const uint8_t *e, int ew, int pos, int c)
{
    unsigned v = 0;
    for (int t = 0; t < c; t++) {
        const int bit = pos + t;
        if ((bit >> 3) < ew)
            v |= (unsigned)((e[bit >> 3] >> (bit & 7)) & 1u) << t;
    }
    return v;
}

/*
 * For every row r: prod_i base_i ^ e_ri mod M (e_ri >= 0), by Straus's interleaved
 * method with a c-bit window table per base shared by all rows.  Numbers are 52 * regs
 * little-endian bytes (bases < M, r2 = R^2 mod M), exponents ew bytes each, row-major
 * (nrows x nbases).  Outputs are < M.  Returns 0, or -1 on a
 * bad argument, -2 when memory runs out.
 */
IFMA int smc_multiexp_rows(int regs, const uint8_t *mod, const uint8_t *r2, uint64_t k0,
                           int nbases, const uint8_t *bases, int nrows, const uint8_t *exps,
                           int ew, int c, uint8_t *out)
{
    if (regs < 1 || regs > MAXREG || nbases < 0 || nrows < 0 || ew < 1 || c < 1 || c > 10)
        return -1;
    const int k = 8 * regs, width = 52 * regs;
    const size_t entries = ((size_t)1 << c) - 1;
    uint64_t *m = aligned_alloc(64, (size_t)k * 8);
    uint64_t *rr = aligned_alloc(64, (size_t)k * 8);
    uint64_t *acc = aligned_alloc(64, (size_t)k * 8);
    uint64_t *table = aligned_alloc(64, (size_t)k * 8 * (entries * (size_t)nbases + 1));
    int status = 0;
    if (!m || !rr || !acc || !table) {
        status = -2;
        goto done;
    }
    to_limbs(mod, width, m, k);
    to_limbs(r2, width, rr, k);
    modctx ctx = {regs, m, k0};
    for (int i = 0; i < nbases; i++) {
        uint64_t *t = table + (size_t)i * entries * k;
        to_limbs(bases + (size_t)i * width, width, acc, k);
        amm(t, acc, rr, &ctx); /* base * R mod M */
        for (size_t d = 1; d < entries; d++)
            amm(t + d * k, t + (d - 1) * k, t, &ctx);
    }
    const int windows = (8 * ew + c - 1) / c;
    for (int r = 0; r < nrows; r++) {
        const uint8_t *row = exps + (size_t)r * nbases * ew;
        int started = 0;
        for (int w = windows - 1; w >= 0; w--) {
            if (started)
                for (int s = 0; s < c; s++)
                    amm(acc, acc, acc, &ctx);
            for (int i = 0; i < nbases; i++) {
                const unsigned d = window_digit(row + (size_t)i * ew, ew, w * c, c);
                if (!d)
                    continue;
                multiply_into(acc, table + ((size_t)i * entries + d - 1) * k, &started, &ctx);
            }
        }
        write_product(out + (size_t)r * width, width, acc, started, &ctx);
    }
done:
    free(m);
    free(rr);
    free(acc);
    free(table);
    return status;
}

/*
 * Horner packing: for each group of `per` consecutive bases (the last may be shorter),
 * prod_i base_i^(2^(shift i)) mod M as acc = acc^(2^shift) * base_i from the top: shift
 * squarings and one multiplication a base, every one in the Montgomery domain.  Public
 * values only (ciphertexts and a public slot width): no constant-time need.
 */
IFMA int smc_horner_pack(int regs, const uint8_t *mod, const uint8_t *r2, uint64_t k0,
                         int nbases, const uint8_t *bases, int per, int shift, uint8_t *out)
{
    if (regs < 1 || regs > MAXREG || nbases < 1 || per < 1 || shift < 1)
        return -1;
    const int k = 8 * regs, width = 52 * regs;
    uint64_t *m = aligned_alloc(64, (size_t)k * 8);
    uint64_t *rr = aligned_alloc(64, (size_t)k * 8);
    uint64_t *acc = aligned_alloc(64, (size_t)k * 8);
    uint64_t *x = aligned_alloc(64, (size_t)k * 8);
    int status = 0;
    if (!m || !rr || !acc || !x) {
        status = -2;
        goto done;
    }
    to_limbs(mod, width, m, k);
    to_limbs(r2, width, rr, k);
    modctx ctx = {regs, m, k0};
    const int groups = (nbases + per - 1) / per;
    for (int g = 0; g < groups; g++) {
        const int lo = g * per, hi = lo + per < nbases ? lo + per : nbases;
        to_limbs(bases + (size_t)(hi - 1) * width, width, x, k);
        amm(acc, x, rr, &ctx); /* the top base * R mod M */
        for (int i = hi - 2; i >= lo; i--) {
            for (int s = 0; s < shift; s++)
                amm(acc, acc, acc, &ctx);
            to_limbs(bases + (size_t)i * width, width, x, k);
            amm(x, x, rr, &ctx);
            amm(acc, acc, x, &ctx);
        }
        write_product(out + (size_t)g * width, width, acc, 1, &ctx);
    }
done:
    free(m);
    free(rr);
    free(acc);
    free(x);
    return status;
}

/*
 * Two independent almost Montgomery multiplications, interleaved: r1 = a1 b1 / R mod M1
 * and r2 = a2 b2 / R mod M2 with the same number of limbs.  One alone waits on its
 * chain of dependent instructions; two fill those waits, so a pair costs about one.
 * No branch and no memory address depends on the values.
 */
IFMA static void amm2(uint64_t *r1, const uint64_t *a1, const uint64_t *b1, const modctx *c1,
                      uint64_t *r2, const uint64_t *a2, const uint64_t *b2, const modctx *c2)
{
    const int n = c1->regs, k = 8 * n;
    __m512i x[MAXREG], bx[MAXREG], mx[MAXREG], z[MAXREG], bz[MAXREG], mz[MAXREG];
    const __m512i zero = _mm512_setzero_si512();
    for (int j = 0; j < n; j++) {
        x[j] = z[j] = zero;
        bx[j] = _mm512_loadu_si512((const void *)(b1 + 8 * j));
        mx[j] = _mm512_loadu_si512((const void *)(c1->m + 8 * j));
        bz[j] = _mm512_loadu_si512((const void *)(b2 + 8 * j));
        mz[j] = _mm512_loadu_si512((const void *)(c2->m + 8 * j));
    }
    const uint64_t b10 = b1[0], m10 = c1->m[0], k10 = c1->k0;
    const uint64_t b20 = b2[0], m20 = c2->m[0], k20 = c2->k0;
    for (int i = 0; i < k; i++) {
        const uint64_t ai = a1[i], ci = a2[i];
        uint64_t t = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(x[0]));
        uint64_t u = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(z[0]));
        t += (ai * b10) & MASK52;
        u += (ci * b20) & MASK52;
        const uint64_t y = (t * k10) & MASK52, v = (u * k20) & MASK52;
        const uint64_t cy = (t + ((y * m10) & MASK52)) >> 52;
        const uint64_t cv = (u + ((v * m20) & MASK52)) >> 52;
        const __m512i av = _mm512_set1_epi64((long long)ai), yv = _mm512_set1_epi64((long long)y);
        const __m512i cw = _mm512_set1_epi64((long long)ci), vv = _mm512_set1_epi64((long long)v);
        for (int j = 0; j < n; j++) {
            x[j] = _mm512_madd52lo_epu64(x[j], av, bx[j]);
            z[j] = _mm512_madd52lo_epu64(z[j], cw, bz[j]);
            x[j] = _mm512_madd52lo_epu64(x[j], yv, mx[j]);
            z[j] = _mm512_madd52lo_epu64(z[j], vv, mz[j]);
        }
        for (int j = 0; j < n - 1; j++) {
            x[j] = _mm512_alignr_epi64(x[j + 1], x[j], 1);
            z[j] = _mm512_alignr_epi64(z[j + 1], z[j], 1);
        }
        x[n - 1] = _mm512_alignr_epi64(zero, x[n - 1], 1);
        z[n - 1] = _mm512_alignr_epi64(zero, z[n - 1], 1);
        x[0] = _mm512_mask_add_epi64(x[0], 1, x[0], _mm512_set1_epi64((long long)cy));
        z[0] = _mm512_mask_add_epi64(z[0], 1, z[0], _mm512_set1_epi64((long long)cv));
        for (int j = 0; j < n; j++) {
            x[j] = _mm512_madd52hi_epu64(x[j], av, bx[j]);
            z[j] = _mm512_madd52hi_epu64(z[j], cw, bz[j]);
            x[j] = _mm512_madd52hi_epu64(x[j], yv, mx[j]);
            z[j] = _mm512_madd52hi_epu64(z[j], vv, mz[j]);
        }
    }
    uint64_t tx[8 * MAXREG], tz[8 * MAXREG];
    for (int j = 0; j < n; j++) {
        _mm512_storeu_si512((void *)(tx + 8 * j), x[j]);
        _mm512_storeu_si512((void *)(tz + 8 * j), z[j]);
    }
    uint64_t cx = 0, cz = 0;
    for (int i = 0; i < k; i++) {
        const uint64_t p = tx[i] + cx, q = tz[i] + cz;
        r1[i] = p & MASK52;
        r2[i] = q & MASK52;
        cx = p >> 52;
        cz = q >> 52;
    }
}

/* r += x for numbers of 52-bit limbs whose sum fits in k limbs (no branch) */
static void add_limbs(uint64_t *r, const uint64_t *x, int k)
{
    uint64_t carry = 0;
    for (int i = 0; i < k; i++) {
        const uint64_t v = r[i] + x[i] + carry;
        r[i] = v & MASK52;
        carry = v >> 52;
    }
}

/* entry d of a table of 2^c entries of k limbs, read whole (every entry is touched) */
IFMA static void table_read(uint64_t *out, const uint64_t *table, unsigned d, int c, int k)
{
    const int n = k / 8;
    __m512i acc[MAXREG];
    for (int j = 0; j < n; j++)
        acc[j] = _mm512_setzero_si512();
    const __m512i want = _mm512_set1_epi64((long long)d);
    for (unsigned e = 0; e < (1u << c); e++) {
        const __mmask8 hit = _mm512_cmpeq_epi64_mask(_mm512_set1_epi64((long long)e), want);
        for (int j = 0; j < n; j++)
            acc[j] = _mm512_mask_mov_epi64(
                acc[j], hit, _mm512_loadu_si512((const void *)(table + (size_t)e * k + 8 * j)));
    }
    for (int j = 0; j < n; j++)
        _mm512_storeu_si512((void *)(out + 8 * j), acc[j]);
}

#define CT_WINDOW 5

/* memset through a volatile pointer: the compiler cannot drop the wipe before free */
static void *(*const volatile wipe)(void *, int, size_t) = memset;

/*
 * Constant time in the exponents: out1 = base1^e1 mod M1 and out2 = base2^e2 mod M2
 * (moduli of the same limb count, exponents of ebits bits at most, ew bytes each), by a
 * fixed 5-bit window over all ebits bits: the same squarings, multiplications and
 * table reads whatever the bits are.  A base is any number below R^2, given as two
 * chunks (lo, hi) of 52 * regs bytes: its Montgomery form lo R^2 / R + hi R^3 / R needs
 * no division by the secret modulus.  rr = R^2 mod M, rrr = R^3 mod M; outputs < M.
 * Returns 0, -1 on a bad argument, -2 when memory runs out.
 */
IFMA int smc_powmod_ct_x2(int regs, int ebits, int ew,
                          const uint8_t *mod1, const uint8_t *rr1, const uint8_t *rrr1,
                          uint64_t k01, const uint8_t *base1, const uint8_t *e1, uint8_t *out1,
                          const uint8_t *mod2, const uint8_t *rr2, const uint8_t *rrr2,
                          uint64_t k02, const uint8_t *base2, const uint8_t *e2, uint8_t *out2)
{
    if (regs < 1 || regs > MAXREG || ebits < 1 || ew < (ebits + 7) / 8)
        return -1;
    const int k = 8 * regs, width = 52 * regs, entries = 1 << CT_WINDOW;
    const size_t words = (size_t)k;
    const size_t total = 8 * words * (2 * (size_t)entries + 14);
    uint64_t *mem = aligned_alloc(64, total);
    if (!mem)
        return -2;
    uint64_t *t1 = mem, *t2 = t1 + entries * words, *m1 = t2 + entries * words;
    uint64_t *m2 = m1 + words, *s1 = m2 + words, *s2 = s1 + words, *x1 = s2 + words;
    uint64_t *x2 = x1 + words, *w1 = x2 + words, *w2 = w1 + words, *one = w2 + words;
    uint64_t *h1 = one + words, *h2 = h1 + words;
    to_limbs(mod1, width, m1, k);
    to_limbs(mod2, width, m2, k);
    modctx c1 = {regs, m1, k01}, c2 = {regs, m2, k02};
    memset(one, 0, 8 * words);
    one[0] = 1;
    /* tables: entry d = base^d R mod M (entry 1 below 4 M, the others below 2 M) */
    to_limbs(rrr1, width, s1, k);
    to_limbs(rrr2, width, s2, k);
    to_limbs(base1 + width, width, x1, k);
    to_limbs(base2 + width, width, x2, k);
    amm2(h1, x1, s1, &c1, h2, x2, s2, &c2); /* hi R^2 mod M */
    to_limbs(rr1, width, s1, k);
    to_limbs(rr2, width, s2, k);
    to_limbs(base1, width, x1, k);
    to_limbs(base2, width, x2, k);
    amm2(t1 + words, x1, s1, &c1, t2 + words, x2, s2, &c2); /* lo R mod M */
    add_limbs(t1 + words, h1, k);
    add_limbs(t2 + words, h2, k);
    amm2(t1, s1, one, &c1, t2, s2, one, &c2); /* entry 0: R mod M */
    for (int d = 2; d < entries; d++)
        amm2(t1 + d * words, t1 + (d - 1) * words, t1 + words, &c1,
             t2 + d * words, t2 + (d - 1) * words, t2 + words, &c2);
    const int windows = (ebits + CT_WINDOW - 1) / CT_WINDOW;
    memcpy(x1, t1, 8 * words); /* 1 in the Montgomery domain */
    memcpy(x2, t2, 8 * words);
    for (int w = windows - 1; w >= 0; w--) {
        for (int s = 0; s < CT_WINDOW; s++)
            amm2(x1, x1, x1, &c1, x2, x2, x2, &c2);
        table_read(w1, t1, window_digit(e1, ew, w * CT_WINDOW, CT_WINDOW), CT_WINDOW, k);
        table_read(w2, t2, window_digit(e2, ew, w * CT_WINDOW, CT_WINDOW), CT_WINDOW, k);
        amm2(x1, x1, w1, &c1, x2, x2, w2, &c2);
    }
    amm2(x1, x1, one, &c1, x2, x2, one, &c2);
    reduce_once(x1, m1, k);
    reduce_once(x2, m2, k);
    from_limbs(x1, k, out1, width);
    from_limbs(x2, k, out2, width);
    wipe(mem, 0, total); /* the tables hold secrets */
    free(mem);
    return 0;
}

/*
 * Fixed-base comb tables (Brickell et al.): row i holds g^(d 2^(w i)) R mod M for
 * d < 2^w, as 52-bit limbs (8 * 8 * regs bytes an entry), rows * 2^w entries in all.
 * base < M, rr = R^2 mod M.  Returns 0 or -1 on a bad argument.
 */
IFMA int smc_comb_build(int regs, const uint8_t *mod, const uint8_t *rr, uint64_t k0,
                        const uint8_t *base, int rows, int window, uint64_t *table)
{
    if (regs < 1 || regs > MAXREG || rows < 1 || window < 1 || window > 16)
        return -1;
    const int k = 8 * regs, width = 52 * regs;
    const size_t entries = (size_t)1 << window;
    uint64_t m[8 * MAXREG], r2[8 * MAXREG], g[8 * MAXREG], one[8 * MAXREG];
    to_limbs(mod, width, m, k);
    to_limbs(rr, width, r2, k);
    to_limbs(base, width, g, k);
    memset(one, 0, sizeof one);
    one[0] = 1;
    modctx ctx = {regs, m, k0};
    amm(g, g, r2, &ctx); /* g R mod M */
    for (int i = 0; i < rows; i++) {
        uint64_t *row = table + (size_t)i * entries * k;
        amm(row, r2, one, &ctx); /* entry 0: R mod M, never read */
        memcpy(row + k, g, (size_t)k * 8);
        for (size_t d = 2; d < entries; d++)
            amm(row + d * k, row + (d - 1) * k, g, &ctx);
        amm(g, row + (entries - 1) * k, g, &ctx); /* g^(2^w) for the next row */
    }
    return 0;
}

/*
 * out_c = prod_i table[i][digits[c * rows + i]] / R mod M for each of count exponents
 * (digit 0 contributes 1): one multiplication per nonzero digit, like the gmpy2 path.
 * Outputs < M, 52 * regs bytes each.
 */
IFMA int smc_comb_product(int regs, const uint8_t *mod, uint64_t k0, const uint64_t *table,
                          int rows, int window, int count, const uint16_t *digits, uint8_t *out)
{
    if (regs < 1 || regs > MAXREG || rows < 1 || window < 1 || window > 16 || count < 0)
        return -1;
    const int k = 8 * regs, width = 52 * regs;
    const size_t entries = (size_t)1 << window;
    uint64_t m[8 * MAXREG], acc[8 * MAXREG];
    to_limbs(mod, width, m, k);
    modctx ctx = {regs, m, k0};
    for (int c = 0; c < count; c++) {
        const uint16_t *ds = digits + (size_t)c * rows;
        int started = 0;
        for (int i = 0; i < rows; i++) {
            const unsigned d = ds[i];
            if (!d)
                continue;
            const uint64_t *entry = table + ((size_t)i * entries + (d & (entries - 1))) * k;
            multiply_into(acc, entry, &started, &ctx);
        }
        write_product(out + (size_t)c * width, width, acc, started, &ctx);
    }
    return 0;
}

/*
 * Signed-digit Pippenger (bucket method) over the windows [lo, hi) of digits: with
 * digits[w * nbases + i] = d (|d| <= 2^(c-1)), returns P = prod over digits d > 0 and
 * Q = prod over digits d < 0 of base_i^(|d| 2^(c (w - lo))), so that the caller's
 * result is P / Q (one inversion in all; multiexp.signed_parts's contract).  Bases < M,
 * rr = R^2 mod M; outputs < M.  Returns 0, -1 on a bad argument, -2 without memory.
 */
IFMA int smc_pippenger(int regs, const uint8_t *mod, const uint8_t *rr, uint64_t k0,
                       int nbases, const uint8_t *bases, int windows, int c,
                       const int16_t *digits, uint8_t *out_pos, uint8_t *out_neg)
{
    if (regs < 1 || regs > MAXREG || nbases < 0 || windows < 0 || c < 1 || c > 12)
        return -1;
    const int k = 8 * regs, width = 52 * regs, half = 1 << (c - 1);
    const size_t words = (size_t)k;
    const size_t total = 8 * words * ((size_t)nbases + 2 * (size_t)half + 8);
    uint64_t *mem = aligned_alloc(64, total);
    int *filled = calloc(2 * (size_t)half + 2, sizeof(int));
    if (!mem || !filled) {
        free(mem);
        free(filled);
        return -2;
    }
    uint64_t *g = mem, *bucket = g + (size_t)nbases * words;
    uint64_t *m = bucket + 2 * (size_t)half * words, *r2 = m + words;
    uint64_t *acc = r2 + words, *run = acc + 2 * words, *sum = run + words;
    to_limbs(mod, width, m, k);
    to_limbs(rr, width, r2, k);
    modctx ctx = {regs, m, k0};
    for (int i = 0; i < nbases; i++) {
        to_limbs(bases + (size_t)i * width, width, g + i * words, k);
        amm(g + i * words, g + i * words, r2, &ctx);
    }
    int started[2] = {0, 0};
    for (int w = windows - 1; w >= 0; w--) {
        for (int side = 0; side < 2; side++)
            if (started[side])
                for (int s = 0; s < c; s++)
                    amm(acc + side * words, acc + side * words, acc + side * words, &ctx);
        memset(filled, 0, (2 * (size_t)half + 2) * sizeof(int));
        const int16_t *col = digits + (size_t)w * nbases;
        for (int i = 0; i < nbases; i++) {
            const int d = col[i];
            if (!d)
                continue;
            const int side = d < 0, slot = side * half + (d < 0 ? -d : d) - 1;
            multiply_into(bucket + (size_t)slot * words, g + i * words, &filled[slot], &ctx);
        }
        for (int side = 0; side < 2; side++) {
            int have_run = 0, have_sum = 0; /* prod_k B_k^k: two running products */
            for (int j = half - 1; j >= 0; j--) {
                const int slot = side * half + j;
                if (filled[slot])
                    multiply_into(run, bucket + (size_t)slot * words, &have_run, &ctx);
                if (have_run)
                    multiply_into(sum, run, &have_sum, &ctx);
            }
            if (have_sum)
                multiply_into(acc + side * words, sum, &started[side], &ctx);
        }
    }
    write_product(out_pos, width, acc, started[0], &ctx);
    write_product(out_neg, width, acc + words, started[1], &ctx);
    free(mem);
    free(filled);
    return 0;
}

/* one Montgomery multiplication a * b / R mod M, for the tests and the benchmark */
IFMA int smc_amm(int regs, const uint8_t *mod, uint64_t k0, const uint8_t *a, const uint8_t *b,
                 uint8_t *out, int repeat)
{
    if (regs < 1 || regs > MAXREG || repeat < 1)
        return -1;
    const int k = 8 * regs, width = 52 * regs;
    uint64_t m[8 * MAXREG], x[8 * MAXREG], y[8 * MAXREG];
    to_limbs(mod, width, m, k);
    to_limbs(a, width, x, k);
    to_limbs(b, width, y, k);
    modctx ctx = {regs, m, k0};
    for (int t = 0; t < repeat; t++)
        amm(x, x, y, &ctx);
    from_limbs(x, k, out, width);
    return 0;
}

/* the library is used through ctypes; as a module it is empty */
static struct PyModuleDef ifma_module = {PyModuleDef_HEAD_INIT, "_ifma",
                                         "AVX-512 IFMA kernels (used through ctypes)", -1, NULL};

PyMODINIT_FUNC PyInit__ifma(void) { return PyModule_Create(&ifma_module); }
