"""``smc-hmm bench crypto``: our Paillier paths against plain phe + gmpy2, side by side.

Every row times the same work both ways in one run at the same key size and
reports medians and the ratio (how many times faster ours is).  The target of a
row (the speed-up it must reach, e.g. ">= 8x" for the 820-term combination on two
lanes) is printed next to its ratio.

The CRT decryption rows put the exponentiations of the same ciphertexts side by side,
timed in interleaved rounds: ``gmpy2.powmod``, as the code before constant-time decryption
(commit a416770) decrypted, and the constant-time backends (:mod:`smc_hmm.crypto.consttime`):
the native IFMA kernel (the default where it runs), OpenSSL's constant-time exponentiation
and the ``gmpy2.powmod_sec`` fallback.  The native rows put the kernel's multi-exponentiation
beside the gmpy2 path it replaces, in the shapes Bob's stages compute
(:mod:`smc_hmm.crypto.native`).
"""

from __future__ import annotations

import copy
import secrets
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import gmpy2
import numpy as np
import phe
from gmpy2 import mpz

from smc_hmm.bench import common
from smc_hmm.bench.common import start
from smc_hmm.compute import Compute
from smc_hmm.crypto import CipherArray, PublicKey, RandomizerPool, consttime, native
from smc_hmm.crypto.multiexp import combine_parts, shared_base_parts, signed_parts
from smc_hmm.crypto.packing import PackedCipherArray, PackingPlan
from smc_hmm.errors import CryptoError

#: the speed-ups ours must reach over phe + gmpy2 (at 2048 bits): encryption by default,
#: with short exponents, online from a warm pool; packed decryption; the 820-term
#: combination on two lanes
ENCRYPT_TARGET = 10
SHORT_ENCRYPT_TARGET = 40
POOL_ENCRYPT_TARGET = 500
PACKED_DECRYPT_TARGET = 10
LINCOMB_TARGET = 8
#: CRT decryption, the constant-time default against the variable-time code before it
#: (commit a416770), in the same run; a target at 2048 bits and above
CRT_DECRYPT_TARGET = 1.6
CRT_DECRYPT_TARGET_BITS = 2048


def run(
    key_bits: int = 2048,
    repeats: int = 5,
    batch: int = 64,
    terms: int = 820,
    workers: int = 2,
    progress=None,
) -> common.BenchResult:
    """Run the crypto benchmark; ``progress(msg)`` is called before each section."""
    say = progress or (lambda msg: None)
    say(f"generating a {key_bits}-bit key pair")
    pk, sk = common.throwaway_keypair(key_bits)
    phe_pk = phe.PaillierPublicKey(pk.n)
    phe_sk = phe.PaillierPrivateKey(phe_pk, sk.p, sk.q)
    public_only = PublicKey(pk.n)  # an encryptor without the primes (Bob under Alice's key)
    values = [secrets.randbelow(1 << 40) - (1 << 39) for _ in range(batch)]
    rows = _encryption_rows(pk, phe_pk, public_only, values, repeats, workers, say)
    rows += _decryption_and_arithmetic_rows(pk, sk, phe_pk, phe_sk, values, repeats, say)
    rows += _crt_decryption_rows(pk, sk, values, repeats, say)
    rows += _lincomb_rows(pk, sk, phe_pk, public_only, terms, repeats, workers, say)
    rows += _native_rows(pk, repeats, say)
    return common.BenchResult(
        "crypto",
        key_bits,
        rows,
        {
            "repeats": repeats,
            "batch": batch,
            "terms": terms,
            "workers": workers,
            "phe": phe.__version__ if hasattr(phe, "__version__") else "1.5.0",
            "gmpy2": gmpy2.version(),
            "constant_time_backend": consttime.default_backend().describe(),
        },
    )


def _encryption_rows(pk, phe_pk, public_only, values, repeats: int, workers: int, say):
    """Encryption against phe's: the default paths (key holder, public key only, on
    ``workers`` lanes), short exponents and a warm randomizer pool."""
    per = 1e6 / len(values)  # seconds per batch -> microseconds per value
    say("encryption")
    t_phe = common.median_seconds(lambda: [phe_pk.encrypt(v) for v in values], repeats) * per

    def us(key) -> float:
        return common.median_seconds(lambda: CipherArray.encrypt(key, values), repeats) * per

    def against_phe(title: str, ours: float, target: float, note: str = "") -> common.Row:
        return common.Row(title, ours, t_phe, "us/value", target, note, better=common.LOWER)

    pk.randomizer.precompute()
    public_only.randomizer.precompute()
    rows = [
        against_phe(
            "encrypt: default (DJN, n/2-bit alpha, table, CRT), key holder", us(pk), ENCRYPT_TARGET
        ),
        against_phe(
            "encrypt: default (DJN, n/2-bit alpha, table), public key only",
            us(public_only),
            ENCRYPT_TARGET,
        ),
        against_phe(
            f"encrypt: default, public key only, {workers} processes",
            _parallel_encryption_us(public_only, values, repeats, workers),
            ENCRYPT_TARGET,
        ),
    ]
    short = PublicKey(pk.n)
    short.use_djn(alpha_bits=224).precompute()
    rows.append(
        against_phe(
            "encrypt: short exponent (DJN, 224-bit alpha)",
            us(short),
            SHORT_ENCRYPT_TARGET,
            "stronger assumption, see randomness.py",
        )
    )
    pooled, pool = _warm_pool_key(pk, len(values) * (repeats + 2), say)
    t_online = us(pooled)
    rows.append(
        against_phe(
            "encrypt: online from a warm pool",
            t_online,
            POOL_ENCRYPT_TARGET,
            f"pool misses: {pool.misses}",
        )
    )
    return rows


def _warm_pool_key(pk, capacity: int, say) -> tuple[PublicKey, RandomizerPool]:
    """A public key encrypting from a randomizer pool of ``capacity``, filled (offline)."""
    pooled = PublicKey(pk.n)
    pool = RandomizerPool(pooled.randomizer, capacity=capacity)
    pooled.use_randomizer(pool)
    say("filling the randomizer pool (offline phase)")
    pool.fill()
    return pooled, pool


def _parallel_encryption_us(public_only, values, repeats: int, workers: int) -> float:
    """Microseconds per value of encrypting 8 batches over ``workers`` lanes (after a
    warm-up in which the workers build their tables)."""
    with Compute.processes(workers) as compute:
        CipherArray.encrypt(public_only, values * 4, compute=compute)  # workers build tables
        big = values * 8
        return (
            common.median_seconds(
                lambda: CipherArray.encrypt(public_only, big, compute=compute), repeats
            )
            * 1e6
            / len(big)
        )


def _decryption_and_arithmetic_rows(pk, sk, phe_pk, phe_sk, values, repeats: int, say):
    """Decryption (one value per ciphertext, packed), addition and scalar multiplication
    against phe's."""
    rows: list[common.Row] = []
    batch = len(values)
    per = 1e6 / batch
    say("decryption")
    cts = CipherArray.encrypt(pk, values)
    phe_cts = [phe.EncryptedNumber(phe_pk, int(c)) for c in cts.ciphertexts()]
    t_phe_dec = common.median_seconds(lambda: [phe_sk.decrypt(c) for c in phe_cts], repeats) * per
    t_dec = common.median_seconds(lambda: cts.decrypt_ints(sk), repeats) * per
    rows.append(
        common.Row(
            "decrypt: one value per ciphertext (CRT, 2 threads)",
            t_dec,
            t_phe_dec,
            "us/value",
            better=common.LOWER,
        )
    )
    plan = PackingPlan.for_key(pk, value_bits=52, growth_bits=8, mask_bits=40)
    packed_vals = np.array(
        [[secrets.randbelow(1 << 52) - (1 << 51) for _ in range(plan.slots)] for _ in range(8)],
        dtype=object,
    )
    packed = PackedCipherArray.encrypt(pk, packed_vals, 0, plan)
    t_packed = (
        common.median_seconds(lambda: packed.decrypt_ints(sk), repeats) * 1e6 / packed_vals.size
    )
    rows.append(
        common.Row(
            f"decrypt: packed ({plan.slots} slots x {plan.slot_bits} bits)",
            t_packed,
            t_phe_dec,
            "us/value",
            PACKED_DECRYPT_TARGET,
            "52-bit values, 8 growth + 40 mask bits",
            better=common.LOWER,
        )
    )
    return rows + _arithmetic_rows(cts, phe_cts, repeats, say)


def _arithmetic_rows(cts, phe_cts, repeats: int, say):
    """Addition and scalar multiplication (integers, reals) against phe's."""
    rows: list[common.Row] = []
    batch = len(phe_cts)
    per = 1e6 / batch
    say("addition and scalar multiplication")
    t_phe_add = (
        common.median_seconds(lambda: [a + b for a, b in zip(phe_cts, phe_cts[1:])], repeats)
        * 1e6
        / (batch - 1)
    )
    t_add = common.median_seconds(lambda: cts + cts, repeats) * per
    rows.append(
        common.Row(
            "add: ciphertext + ciphertext", t_add, t_phe_add, "us/value", better=common.LOWER
        )
    )
    weights = [secrets.randbelow(1 << 40) - (1 << 39) for _ in range(batch)]
    t_phe_mul = (
        common.median_seconds(lambda: [c * w for c, w in zip(phe_cts, weights)], repeats) * per
    )
    t_mul = common.median_seconds(lambda: cts.mul(weights), repeats) * per
    rows.append(
        common.Row(
            "scalar multiply: 40-bit signed integers",
            t_mul,
            t_phe_mul,
            "us/value",
            better=common.LOWER,
        )
    )
    reals = [secrets.randbelow(10**6) / 10**6 - 0.5 for _ in range(batch)]
    t_phe_fmul = (
        common.median_seconds(lambda: [c * r for c, r in zip(phe_cts, reals)], repeats) * per
    )
    t_fmul = common.median_seconds(lambda: cts.mul_fixed(reals, 24), repeats) * per
    rows.append(
        common.Row(
            "scalar multiply: reals (ours 24-bit fixed point, phe float)",
            t_fmul,
            t_phe_fmul,
            "us/value",
            better=common.LOWER,
        )
    )
    return rows


def _decrypt_variable_time(sk, ciphertexts) -> list[int]:
    """CRT decryption as commit a416770 (before constant time) computed it, for the same-run
    comparison: ``gmpy2.powmod_base_list`` (variable time in the secret p - 1, q - 1), one
    chunk of ciphertexts per thread for batches of 16 or more."""
    cs = [mpz(c) for c in ciphertexts]
    sk.public_key.validate_ciphertexts(cs, check_gcd=False)

    def chunk(part):
        p, q, psq, qsq = sk._p, sk._q, sk._psq, sk._qsq
        xp = gmpy2.powmod_base_list([c % psq for c in part], p - 1, psq)
        xq = gmpy2.powmod_base_list([c % qsq for c in part], q - 1, qsq)
        n, half = sk.public_key.n_mpz, sk.public_key.n_mpz // 2
        out = []
        for a, b in zip(xp, xq):
            mp = (a - 1) // p * sk._hp % p
            mq = (b - 1) // q * sk._hq % q
            m = mp + ((mq - mp) * sk._p_inv % q) * p
            out.append(int(m - n) if m > half else int(m))
        return out

    if len(cs) < 16 or sk.decrypt_threads <= 1:
        return chunk(cs)
    size = -(-len(cs) // sk.decrypt_threads)
    chunks = [cs[i : i + size] for i in range(0, len(cs), size)]
    with ThreadPoolExecutor(len(chunks)) as pool:
        return [m for part in pool.map(chunk, chunks) for m in part]


def _crt_decryption_rows(pk, sk, values, repeats: int, say):
    """CRT decryption as before (gmpy2.powmod, variable time) against the constant-time
    backends, medians of interleaved rounds: a batch (two threads either way), one
    ciphertext (its two halves on two threads now), one exponentiation c^(p-1) mod p^2."""
    say("CRT decryption: gmpy2.powmod (as before, a416770) vs the constant-time backends")
    backends = _constant_time_backends(say)
    keys = {}
    for name, backend in backends.items():
        keys[name] = copy.copy(sk)  # the same key, decrypting on this backend
        keys[name].secret_powmod = backend
    cts = CipherArray.encrypt(pk, values).ciphertexts()
    if any(k.decrypt_ints(cts) != values for k in keys.values()) or (
        _decrypt_variable_time(sk, cts) != values
    ):
        raise AssertionError("CRT decryption mismatch in benchmark")
    singles = 8  # one-ciphertext calls per timing (each ~1-3 ms at 2048 bits)
    rounds = max(repeats, 7)
    t = common.interleaved_medians(_crt_cases(sk, keys, backends, cts, singles), rounds)
    target = CRT_DECRYPT_TARGET if pk.bits >= CRT_DECRYPT_TARGET_BITS else None
    p, psq = sk._p, sk._psq
    # (timing, row title, what it is against, scale, unit, note): a row per backend each
    timings = (
        ("batch", f"CRT decryption, batch of {len(cts)}", "gmpy2.powmod (a416770)",
         1e6 / len(cts), "us/value", f"2 threads both; medians of {rounds} interleaved rounds"),
        ("one", "CRT decryption, one ciphertext", "gmpy2.powmod (a416770)", 1e6 / singles,
         "us/value", "before: the halves one after the other; now on two threads if the "
         "backend releases the GIL"),
        ("exp", "exponentiation c^(p-1) mod p^2, one thread", "gmpy2.powmod", 1e6 / singles,
         "us", f"{psq.bit_length()}-bit modulus, {(p - 1).bit_length()}-bit exponent"),
    )  # fmt: skip
    return _crt_rows(t, backends, timings, target)


def _crt_rows(t: dict, backends: dict, timings, target: float | None) -> list[common.Row]:
    """A row per timing and backend against the code before constant time; the default
    backend's batch row carries the target."""
    default = consttime.default_backend()
    rows: list[common.Row] = []
    for kind, title, before, scale, unit, note in timings:
        for name in backends:
            targeted = target if kind == "batch" and backends[name] is default else None
            rows.append(
                common.Row(
                    f"{title}: {name} vs {before}",
                    t[f"{name} {kind}"] * scale,
                    t[f"old {kind}"] * scale,
                    unit,
                    targeted,
                    note + ("; target: >= 1.6x faster than a416770" if targeted else ""),
                    better=common.LOWER,
                )
            )
    return rows


def _constant_time_backends(say) -> dict:
    """The constant-time exponentiation backends that run here, by row name."""
    backends = {}
    for name, key in (("IFMA kernel", "ifma"), ("OpenSSL consttime", "openssl")):
        try:
            backends[name] = consttime.backend_by_name(key)
        except CryptoError as e:
            say(f"no {name} rows: {e}")
    backends["gmpy2.powmod_sec"] = consttime.GMPY2_SEC
    return backends


def _crt_cases(sk, keys: dict, backends: dict, cts, singles: int) -> dict:
    """The timed cases by name ("old" or a backend's, then "batch", "one" or "exp"): the
    batch decrypted, ``singles`` decryptions of one ciphertext, ``singles``
    exponentiations c^(p-1) mod p^2."""
    one = cts[:1]
    p, psq = sk._p, sk._psq
    base = cts[0] % psq
    fns = {"old batch": lambda: _decrypt_variable_time(sk, cts)}
    fns |= {f"{name} batch": lambda k=k: k.decrypt_ints(cts) for name, k in keys.items()}
    fns["old one"] = lambda: [_decrypt_variable_time(sk, one) for _ in range(singles)]
    fns |= {
        f"{name} one": lambda k=k: [k.decrypt_ints(one) for _ in range(singles)]
        for name, k in keys.items()
    }
    fns["old exp"] = lambda: [gmpy2.powmod(base, p - 1, psq) for _ in range(singles)]
    fns |= {
        f"{name} exp": lambda b=b: [b.powmod(base, p - 1, psq) for _ in range(singles)]
        for name, b in backends.items()
    }
    return fns


def _lincomb_rows(pk, sk, phe_pk, public_only, terms: int, repeats: int, workers: int, say):
    """The ``terms``-term signed linear combination against phe's, on one lane and on
    ``workers`` (with the machine's own lane scaling measured in the same rounds)."""
    rows: list[common.Row] = []
    say(f"{terms}-term linear combination")
    lin_vals = [secrets.randbelow(1 << 30) for _ in range(terms)]
    lin_cts = CipherArray.encrypt(public_only, lin_vals)
    lin_phe = [phe.EncryptedNumber(phe_pk, int(c)) for c in lin_cts.ciphertexts()]
    lin_w = [secrets.randbelow(1 << 40) * (1 if secrets.randbits(1) else -1) for _ in range(terms)]
    rounds = max(repeats, 7)
    ms, scaling = _lincomb_milliseconds(pk, lin_phe, lin_cts, lin_w, workers, rounds)
    rows.append(
        common.Row(
            f"linear combination: {terms} terms, signed 40-bit (1 process)",
            ms["serial"],
            ms["phe"],
            "ms",
            better=common.LOWER,
        )
    )
    rows.append(
        common.Row(
            f"linear combination: {terms} terms, signed 40-bit ({workers} processes)",
            ms["parallel"],
            ms["phe"],
            "ms",
            LINCOMB_TARGET,
            f"caller + {workers - 1} worker, medians of {rounds} interleaved rounds",
            better=common.LOWER,
        )
    )
    rows.append(
        common.Row(
            f"machine: {workers} lanes of modular multiplications at once vs 1",
            scaling,
            None,
            "x faster",
            None,
            f"ideal {workers}x; measured in the same rounds as the rows above",
        )
    )
    # correctness of what was timed
    expect = sum(v * w for v, w in zip(lin_vals, lin_w))
    got = int(lin_cts.lincomb(lin_w).decrypt_ints(sk).item())
    if got != expect:
        raise AssertionError("linear combination mismatch in benchmark")
    return rows


def _lincomb_milliseconds(pk, lin_phe, lin_cts, lin_w, workers: int, rounds: int):
    """(milliseconds by case: phe's, ours serial and on ``workers`` lanes; the machine's
    lane scaling), medians of ``rounds`` interleaved rounds."""
    scalings: list[float] = []
    with Compute.processes(workers) as compute:
        compute.warm_up()
        ms = {
            name: t * 1e3
            for name, t in common.interleaved_medians(
                {
                    "phe": lambda: sum(c * w for c, w in zip(lin_phe, lin_w)),
                    "serial": lambda: lin_cts.lincomb(lin_w),
                    "parallel": lambda: lin_cts.lincomb(lin_w, compute=compute),
                    "machine": lambda: scalings.append(lane_scaling(compute, pk.nsquare_mpz)),
                },
                rounds,
            ).items()
        }
    return ms, statistics.median(scalings)


#: (title, bases, rows, exponent bits, signed): the shapes Bob's stages compute -- a
#: LOGSUM reply over a model's edges, the emission blocks' shared features
NATIVE_SHAPES = (
    ("LOGSUM reply: 9 bases, 1 row, 209-bit", 9, 1, 209, False),
    ("emission block: 26 bases, 50 rows, signed 60-bit", 26, 50, 60, True),
)


def _native_rows(pk, repeats: int, say) -> list[common.Row]:
    """The native kernel's multi-exponentiation against the gmpy2 path it replaces
    (:func:`~smc_hmm.crypto.multiexp.shared_base_parts`, both on one thread), and one
    modular multiplication; none where the kernel does not run here."""
    if native.kernel() is None:
        say("no native kernel here (not built, no AVX-512 IFMA, or SMC_HMM_NATIVE=off)")
        return []
    say("native kernel vs gmpy2: shared-base multi-exponentiation")
    n2, rounds = pk.nsquare_mpz, max(repeats, 7)
    rng = secrets.SystemRandom()
    rows = []
    for title, terms, count, bits, signed in NATIVE_SHAPES:
        bases = CipherArray.encrypt(pk, list(range(1, terms + 1))).ciphertexts()
        weights = [
            [rng.getrandbits(bits) * (rng.choice((-1, 1)) if signed else 1) for _ in range(terms)]
            for _ in range(count)
        ]
        ours = partial(shared_base_parts, bases, weights, n2, use_native=True)
        before = partial(shared_base_parts, bases, weights, n2, use_native=False)
        if [combine_parts([p], n2) for p in ours()] != [combine_parts([p], n2) for p in before()]:
            raise AssertionError("native multi-exponentiation mismatch in benchmark")
        t = common.interleaved_medians({"native": ours, "gmpy2": before}, rounds)
        rows.append(
            common.Row(f"multi-exponentiation, {title}: IFMA kernel vs gmpy2", t["native"] * 1e3,
                       t["gmpy2"] * 1e3, "ms", None,
                       f"one thread; medians of {rounds} interleaved rounds; ship bar 1.3x",
                       better=common.LOWER)
        )  # fmt: skip
    terms, bits = 820, 40  # the linear combination of the rows above: Pippenger's buckets
    bases = CipherArray.encrypt(pk, [v % 997 for v in range(terms)]).ciphertexts()
    exps = [rng.getrandbits(bits) * rng.choice((-1, 1)) for _ in range(terms)]
    ours = partial(signed_parts, bases, exps, n2, use_native=True)
    before = partial(signed_parts, bases, exps, n2, use_native=False)
    if combine_parts([ours()], n2) != combine_parts([before()], n2):
        raise AssertionError("native Pippenger mismatch in benchmark")
    t = common.interleaved_medians({"native": ours, "gmpy2": before}, rounds)
    rows.append(
        common.Row(f"multi-exponentiation, Pippenger: {terms} bases, signed {bits}-bit: IFMA "
                   "kernel vs gmpy2", t["native"] * 1e3, t["gmpy2"] * 1e3, "ms", None,
                   f"one thread; medians of {rounds} interleaved rounds; ship bar 1.3x",
                   better=common.LOWER)
    )  # fmt: skip
    kernel, chain = native.kernel(), 2000
    a, b = bases[0], bases[1]

    def gmpy2_chain():
        x = a
        for _ in range(chain):
            x = x * b % n2

    t = common.interleaved_medians(
        {"native": lambda: kernel.montgomery_product(a, b, n2, chain), "gmpy2": gmpy2_chain},
        rounds,
    )
    rows.append(
        common.Row(f"one multiplication mod n^2 ({n2.bit_length()} bits): IFMA vs gmpy2",
                   t["native"] / chain * 1e6, t["gmpy2"] / chain * 1e6, "us", None,
                   f"chains of {chain}", better=common.LOWER)
    )  # fmt: skip
    return rows


def _multiplication_lane(modulus, count: int, seed: int) -> float:
    """Seconds for ``count`` chained multiplications mod ``modulus`` (a calibration lane)."""
    state = gmpy2.random_state(seed)
    values = [gmpy2.mpz_urandomb(state, modulus.bit_length()) % modulus for _ in range(count)]
    start = time.perf_counter()
    acc = mpz(1)
    for v in values:
        acc = acc * v % modulus
    return time.perf_counter() - start


def lane_scaling(compute: Compute, modulus, count: int = 1500) -> float:
    """How much more multiplication throughput all lanes give than one, right now.

    On a shared VM two vCPUs are not always two cores: when the host runs them on
    one core's two hyperthreads, two busy processes each slow down, and every
    parallel row of this benchmark with them.  Reported next to those rows.
    """
    solo = _multiplication_lane(modulus, count, 1)
    lanes = compute.map(
        _multiplication_lane,
        [modulus] * compute.workers,
        [count] * compute.workers,
        range(compute.workers),
    )
    return compute.workers * solo / max(lanes)


def add_arguments(parser) -> None:
    """Options of ``smc-hmm bench crypto``."""
    with common.common_arguments(parser, workers=True, workers_help="processes for parallel rows"):
        parser.add_argument(
            "--repeats", type=common.bounded(1, 1000), default=5, help="timed repeats (median)"
        )
        parser.add_argument(
            "--batch", type=common.bounded(1, 100_000), default=64, help="values per timed batch"
        )
        parser.add_argument(
            "--terms",
            type=common.bounded(1, 100_000),
            default=820,
            help="linear-combination terms",
        )


def main(args) -> int:
    """Run from parsed arguments, print the table, optionally write JSON."""
    console, say = start(args, width=140)
    options = (args.repeats, args.batch, args.terms, args.workers)
    result = run(args.key_bits, *options, progress=say)
    return common.finish(args, result, console, table=True)
