/*
 * Half-gates garbling, evaluation and IKNP's bit work on AES-NI, for smc_hmm.gc.native.
 *
 * Written by hand because no maintained library offers garbled circuits or OT extension
 * to Python (emp-toolkit, swanky and ABY are C++/Rust frameworks without bindings).  The
 * constructions are those of the numpy path, bit for bit (the tests compare the two):
 *
 *  - the hash H(x, i) = pi(sigma(x) ^ i) ^ sigma(x), pi fixed-key AES-128 (FIXED_KEY of
 *    smc_hmm.gc.hashing), sigma(hi || lo) = (hi ^ lo) || hi, the tweak i XORed into the
 *    low 64 bits (Bellare-Hoang-Keelveedhi-Rogaway 2013; Guo-Katz-Wang-Yu 2020);
 *  - half gates with free XOR and point-and-permute (Zahur-Rosulek-Evans 2015, Fig. 2);
 *  - the bit-matrix transposition of IKNP and the KOS check's sum_j chi_j x_j over
 *    GF(2^128) mod x^128 + x^7 + x^2 + x + 1 (carry-less multiplication).
 *
 * A block is 16 bytes, little-endian words [lo, hi] as numpy's (n, 2) uint64 arrays.
 * Gates come in the compiled circuit's order (layer by layer), so every input is ready.
 * Nothing depends on Python: the module is loaded with ctypes (which releases the GIL
 * for each call).  Functions with the AES target attribute run only after
 * smc_gc_supported() returned 1, so the library loads on any x86-64 CPU; elsewhere it
 * builds without them and reports itself unsupported.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* only to make the library an importable (empty) module */
#include <stdint.h>
#include <string.h>

#define GATE_XOR 0
#define GATE_NOT 1
#define GATE_AND 2

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define HAVE_X86 1
#define AESNI __attribute__((target("aes,sse4.1,pclmul")))

int smc_gc_supported(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse4.1") &&
           __builtin_cpu_supports("pclmul");
}

typedef struct {
    __m128i k[11];
} aes_key;

AESNI static __m128i expand_step(__m128i key, __m128i assist)
{
    assist = _mm_shuffle_epi32(assist, 0xff);
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
    return _mm_xor_si128(key, assist);
}

AESNI static void aes_expand(aes_key *ks, const uint8_t *key)
{
    __m128i k = _mm_loadu_si128((const __m128i *)key);
    ks->k[0] = k;
#define ROUND(i, rcon) \
    k = expand_step(k, _mm_aeskeygenassist_si128(k, rcon)); \
    ks->k[i] = k;
    ROUND(1, 0x01) ROUND(2, 0x02) ROUND(3, 0x04) ROUND(4, 0x08) ROUND(5, 0x10)
    ROUND(6, 0x20) ROUND(7, 0x40) ROUND(8, 0x80) ROUND(9, 0x1b) ROUND(10, 0x36)
#undef ROUND
}

/* the fixed-key permutation pi on n independent blocks at once (n <= 4) */
AESNI static inline void aes4(const aes_key *ks, __m128i *x, int n)
{
    for (int j = 0; j < n; j++)
        x[j] = _mm_xor_si128(x[j], ks->k[0]);
    for (int r = 1; r < 10; r++)
        for (int j = 0; j < n; j++)
            x[j] = _mm_aesenc_si128(x[j], ks->k[r]);
    for (int j = 0; j < n; j++)
        x[j] = _mm_aesenclast_si128(x[j], ks->k[10]);
}

/* sigma(x): lo' = hi, hi' = hi ^ lo */
AESNI static inline __m128i sigma(__m128i x)
{
    const __m128i hi_mask = _mm_set_epi64x(-1, 0);
    return _mm_xor_si128(_mm_shuffle_epi32(x, 0x4e), _mm_and_si128(x, hi_mask));
}

static inline __m128i load(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }
static inline void store(uint8_t *p, __m128i v) { _mm_storeu_si128((__m128i *)p, v); }
AESNI static inline __m128i select_mask(uint64_t bit)
{
    return _mm_set1_epi64x((long long)(0 - bit));
}
AESNI static inline uint64_t lsb(__m128i v) { return (uint64_t)_mm_cvtsi128_si64(v) & 1; }

/* H(x_j, tweak_j) for n <= 4 blocks */
AESNI static inline void hash4(const aes_key *ks, __m128i *x, const uint64_t *tweak, int n)
{
    __m128i s[4], y[4];
    for (int j = 0; j < n; j++) {
        s[j] = sigma(x[j]);
        y[j] = _mm_xor_si128(s[j], _mm_set_epi64x(0, (long long)tweak[j]));
    }
    aes4(ks, y, n);
    for (int j = 0; j < n; j++)
        x[j] = _mm_xor_si128(y[j], s[j]);
}

/* H(blocks[i], tweaks[i]) for every i: the numpy path's tccr_hash */
AESNI int smc_gc_hash(const uint8_t *fixed_key, int64_t n, const uint8_t *blocks,
                      const uint64_t *tweaks, uint8_t *out)
{
    aes_key ks;
    aes_expand(&ks, fixed_key);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128i x[4];
        for (int j = 0; j < 4; j++)
            x[j] = load(blocks + 16 * (i + j));
        hash4(&ks, x, tweaks + i, 4);
        for (int j = 0; j < 4; j++)
            store(out + 16 * (i + j), x[j]);
    }
    for (; i < n; i++) {
        __m128i x = load(blocks + 16 * i);
        hash4(&ks, &x, tweaks + i, 1);
        store(out + 16 * i, x);
    }
    return 0;
}

/* Garble n gates in order: w0 holds every wire's 0-label (inputs set by the caller);
 * tables get (T_G, T_E) of AND gate k at 32 k. */
AESNI int smc_gc_garble(const uint8_t *fixed_key, int64_t n, const int8_t *kind,
                        const int64_t *a, const int64_t *b, const int64_t *out,
                        const int64_t *and_index, uint8_t *w0, const uint8_t *delta_bytes,
                        uint64_t tweak_base, uint8_t *tables)
{
    aes_key ks;
    aes_expand(&ks, fixed_key);
    const __m128i delta = load(delta_bytes);
    for (int64_t g = 0; g < n; g++) {
        uint8_t *wo = w0 + 16 * out[g];
        if (kind[g] == GATE_XOR) {
            store(wo, _mm_xor_si128(load(w0 + 16 * a[g]), load(w0 + 16 * b[g])));
        } else if (kind[g] == GATE_NOT) {
            store(wo, _mm_xor_si128(load(w0 + 16 * a[g]), delta));
        } else if (kind[g] == GATE_AND) {
            const __m128i a0 = load(w0 + 16 * a[g]), b0 = load(w0 + 16 * b[g]);
            const uint64_t pa = lsb(a0), pb = lsb(b0);
            const uint64_t j = tweak_base + 2 * (uint64_t)and_index[g];
            const uint64_t tw[4] = {j, j, j + 1, j + 1};
            __m128i h[4] = {a0, _mm_xor_si128(a0, delta), b0, _mm_xor_si128(b0, delta)};
            hash4(&ks, h, tw, 4);
            const __m128i tg = _mm_xor_si128(_mm_xor_si128(h[0], h[1]),
                                             _mm_and_si128(select_mask(pb), delta));
            const __m128i wg0 = _mm_xor_si128(h[0], _mm_and_si128(select_mask(pa), tg));
            const __m128i te = _mm_xor_si128(_mm_xor_si128(h[2], h[3]), a0);
            const __m128i we0 =
                _mm_xor_si128(h[2], _mm_and_si128(select_mask(pb), _mm_xor_si128(te, a0)));
            store(wo, _mm_xor_si128(wg0, we0));
            uint8_t *t = tables + 32 * and_index[g];
            store(t, tg);
            store(t + 16, te);
        } else {
            return 1;
        }
    }
    return 0;
}

/* Evaluate n gates in order on the active labels w (inputs set by the caller). */
AESNI int smc_gc_evaluate(const uint8_t *fixed_key, int64_t n, const int8_t *kind,
                          const int64_t *a, const int64_t *b, const int64_t *out,
                          const int64_t *and_index, uint8_t *w, uint64_t tweak_base,
                          const uint8_t *tables)
{
    aes_key ks;
    aes_expand(&ks, fixed_key);
    for (int64_t g = 0; g < n; g++) {
        uint8_t *wo = w + 16 * out[g];
        if (kind[g] == GATE_XOR) {
            store(wo, _mm_xor_si128(load(w + 16 * a[g]), load(w + 16 * b[g])));
        } else if (kind[g] == GATE_NOT) {
            store(wo, load(w + 16 * a[g]));
        } else if (kind[g] == GATE_AND) {
            const __m128i la = load(w + 16 * a[g]), lb = load(w + 16 * b[g]);
            const uint64_t sa = lsb(la), sb = lsb(lb);
            const uint64_t j = tweak_base + 2 * (uint64_t)and_index[g];
            const uint64_t tw[2] = {j, j + 1};
            __m128i h[2] = {la, lb};
            hash4(&ks, h, tw, 2);
            const uint8_t *t = tables + 32 * and_index[g];
            const __m128i tg = load(t), te = load(t + 16);
            __m128i r = _mm_xor_si128(h[0], _mm_and_si128(select_mask(sa), tg));
            r = _mm_xor_si128(r, h[1]);
            r = _mm_xor_si128(r, _mm_and_si128(select_mask(sb), _mm_xor_si128(te, la)));
            store(wo, r);
        } else {
            return 1;
        }
    }
    return 0;
}

/* carry-less 128 x 128 -> 256 product (lo, hi) */
AESNI static inline void clmul(__m128i x, __m128i y, __m128i *lo, __m128i *hi)
{
    __m128i t0 = _mm_clmulepi64_si128(x, y, 0x00);
    __m128i t1 = _mm_clmulepi64_si128(x, y, 0x10);
    __m128i t2 = _mm_clmulepi64_si128(x, y, 0x01);
    __m128i t3 = _mm_clmulepi64_si128(x, y, 0x11);
    t1 = _mm_xor_si128(t1, t2);
    *lo = _mm_xor_si128(t0, _mm_slli_si128(t1, 8));
    *hi = _mm_xor_si128(t3, _mm_srli_si128(t1, 8));
}

/* sum_j chi_j * x_j over GF(2^128), unreduced (lo, hi) accumulated, then reduced with
 * the numpy path's rule: v mod x^128 + x^7 + x^2 + x + 1. */
AESNI int smc_gf128_inner(int64_t n, const uint8_t *chi, const uint8_t *rows, uint8_t *out)
{
    __m128i acc_lo = _mm_setzero_si128(), acc_hi = _mm_setzero_si128();
    for (int64_t j = 0; j < n; j++) {
        __m128i lo, hi;
        clmul(load(chi + 16 * j), load(rows + 16 * j), &lo, &hi);
        acc_lo = _mm_xor_si128(acc_lo, lo);
        acc_hi = _mm_xor_si128(acc_hi, hi);
    }
    uint64_t v[4];
    store((uint8_t *)v, acc_lo);
    store((uint8_t *)(v + 2), acc_hi);
    /* fold the high 128 bits twice: hi * (x^7 + x^2 + x + 1) */
    for (int round = 0; round < 2; round++) {
        uint64_t h0 = v[2], h1 = v[3];
        v[2] = v[3] = 0;
        uint64_t f[3] = {0, 0, 0}; /* h * (1 + x + x^2 + x^7), up to 135 bits */
        const int shifts[4] = {0, 1, 2, 7};
        for (int s = 0; s < 4; s++) {
            int k = shifts[s];
            f[0] ^= h0 << k;
            f[1] ^= (h1 << k) | (k ? h0 >> (64 - k) : 0);
            f[2] ^= k ? h1 >> (64 - k) : 0;
        }
        v[0] ^= f[0];
        v[1] ^= f[1];
        v[2] ^= f[2];
    }
    memcpy(out, v, 16);
    return 0;
}
#else
int smc_gc_supported(void) { return 0; }
#endif

/* IKNP's transposition: cols is 128 rows of nbytes (bit j of column k at byte j/8, bit
 * j%8); out gets 8 nbytes rows of 16 bytes (bit k of row j = bit j of column k). */
#ifdef HAVE_X86
int smc_gc_transpose(int64_t nbytes, const uint8_t *cols, uint8_t *out)
{
    /* 16 columns' bytes at a time: movemask gathers one output row's 16 bits (SSE2) */
    for (int rr = 0; rr < 128; rr += 16) {
        for (int64_t byte = 0; byte < nbytes; byte++) {
            uint8_t gather[16];
            for (int i = 0; i < 16; i++)
                gather[i] = cols[(int64_t)(rr + i) * nbytes + byte];
            __m128i v = _mm_loadu_si128((const __m128i *)gather);
            for (int i = 7; i >= 0; i--) {
                const uint16_t h = (uint16_t)_mm_movemask_epi8(v);
                memcpy(out + 16 * (8 * byte + i) + rr / 8, &h, 2);
                v = _mm_slli_epi64(v, 1);
            }
        }
    }
    return 0;
}
#else
int smc_gc_transpose(int64_t nbytes, const uint8_t *cols, uint8_t *out)
{
    for (int64_t byte = 0; byte < nbytes; byte++) {
        uint8_t *rows = out + 16 * 8 * byte;
        memset(rows, 0, 16 * 8);
        for (int k = 0; k < 128; k++) {
            const uint8_t c = cols[(int64_t)k * nbytes + byte];
            if (!c)
                continue;
            for (int i = 0; i < 8; i++)
                rows[16 * i + (k >> 3)] |= (uint8_t)(((c >> i) & 1) << (k & 7));
        }
    }
    return 0;
}
#endif

/* the library is used through ctypes; as a module it is empty */
static struct PyModuleDef gc_module = {PyModuleDef_HEAD_INIT, "_gcnative",
                                       "AES-NI garbling kernels (used through ctypes)", -1,
                                       NULL};

PyMODINIT_FUNC PyInit__gcnative(void) { return PyModule_Create(&gc_module); }
