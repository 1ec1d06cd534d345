"""``smc-hmm bench compare``: batched DGK/Veugen secure comparison against TNO's.

For each l (``--bits``, default 16 32 64) it runs the registered ``compare``
protocol in-process (found by name through its entry point, so this module
never imports :mod:`protocols`) once with k = 1 and once with k = ``--batch``
pairs in the same messages, and reports milliseconds per comparison (the
evaluator's ``compare`` phase: steps 1-4 of both parties, keys, tables and
input encryption excluded; Bob keeps E([a < b]) like TNO's initiator), rounds and bytes.  With
``--argmax K`` it also times a K-way secure argmax of l = 64-bit values (whole
run in-process, target under 1 s at 2048 bits).

The baseline is TNO's ``tno.mpc.protocols.secure_comparison`` 4.4.0 (ePrint
2018/1100 as well; one comparison per call, so a batch of k costs k calls),
imported lazily: install it with ``pip install
"tno.mpc.protocols.secure_comparison==4.4.0"
"tno.mpc.encryption_schemes.utils==0.15.0"`` (it pulls aiohttp and a pytest
plugin that needs pytest-asyncio: a separate virtual environment with
``--system-site-packages`` keeps the test suite's environment clean).  Its
Paillier and DGK keys (n = 2048, v = 160 bits, u = next_prime(2^(l_max + 2)),
TNO's own convention) are generated once; their generation time is reported.
TNO's schemes precompute randomness in background processes, which this
benchmark leaves on (their default).
"""

from __future__ import annotations

import statistics
import time
import warnings

from smc_hmm.bench import common
from smc_hmm.errors import ConfigError, InsecureKeyWarning
from smc_hmm.progress import status

TNO_PIN = '"tno.mpc.protocols.secure_comparison==4.4.0" "tno.mpc.encryption_schemes.utils==0.15.0"'
BATCH_TARGET = 3.0  # batched: at least 3x faster than TNO per comparison
ARGMAX_LIMIT_S = 1.0  # the argmax's whole run, at keys of TARGET_KEY_BITS and above
TARGET_KEY_BITS = 2048
GARBLED_VS_DGK = 50.0  # the garbled comparison at batches of 100 and more: >= 50x DGK
GARBLED_VS_TNO = 100.0  # and >= 100x TNO
GARBLED_TARGET_BATCH = 100
#: the traffic row: bytes per comparison at l = 50 bits (the spotting recursion's length)
BYTES_BITS = 50
BYTES_BATCH = 100
GARBLED_ARGMAX_LIMIT_S = 0.03  # a 10-way argmax of 64-bit values on the garbled stage


def add_arguments(parser) -> None:
    with common.common_arguments(parser, key_help="Paillier and DGK modulus"):
        parser.add_argument(
            "--bits",
            type=common.bounded(1, 512),
            nargs="+",
            default=[16, 32, 64],
            help="input bit lengths l",
        )
        parser.add_argument(
            "--batch",
            type=common.bounded(1, 100_000),
            default=100,
            help="pairs per batched run (k)",
        )
        parser.add_argument(
            "--repeats",
            type=common.bounded(1, 100),
            default=3,
            help="runs per measurement (median)",
        )
        parser.add_argument(
            "--argmax",
            type=common.bounded(0, 1000),
            default=10,
            metavar="K",
            help="K-way argmax of 64-bit values (0: skip)",
        )
        parser.add_argument(
            "--garbled-batches",
            type=common.bounded(0, 1_000_000),
            nargs="+",
            default=[1, 100, 10000],
            help="batch sizes of the garbled comparison (0 entries: skip it)",
        )
        parser.add_argument("--no-tno", action="store_true", help="skip the TNO baseline")
        parser.add_argument(
            "--tno-count",
            type=common.bounded(1, 1000),
            default=5,
            help="TNO comparisons timed per l (median)",
        )
        parser.add_argument(
            "--protocol",
            default="compare",
            help='the comparison protocol: registered name or "module:object"',
        )
        parser.add_argument(
            "--argmax-protocol",
            default="argmax",
            help='the argmax protocol: registered name or "module:object"',
        )


# -- ours --------------------------------------------------------------------------------


def _run(protocol, params, bob_input, keypair, min_key_bits):
    from smc_hmm.runtime import run_protocol

    return run_protocol(
        protocol,
        params,
        {"alice": ("key_holder", None), "bob": ("evaluator", bob_input)},
        keys={"alice": keypair},
        min_key_bits=min_key_bits,
        timeout=600,
    )


def _phase_wall(result, phase: str, party: str = "bob") -> float:
    """Wall time of ``party``'s phase: Bob's ``compare`` phase spans steps 1-4 exactly
    (Alice's also covers her wait for Bob's key setup and input encryption)."""
    return result.cost.to_dict()["parties"][party]["phases"].get(phase, {}).get("wall", 0.0)


def measure_ours(
    protocol, keypair, bits: int, count: int, repeats: int, min_key_bits: int, comparison="dgk"
):
    """(median seconds of the compare phase, rounds, bytes, total run seconds) for k = count,
    with the ``comparison`` the protocol runs (``dgk`` or ``garbled``)."""
    import secrets

    top = (1 << (bits - 1)) - 1
    walls, totals, last = [], [], None
    for _ in range(repeats):
        a = [secrets.randbelow(2 * top + 1) - top for _ in range(count)]
        b = [secrets.randbelow(2 * top + 1) - top for _ in range(count)]
        params = {"bits": bits, "count": count, "reveal_to": "none", "comparison": comparison}
        t0 = time.perf_counter()
        last = _run(protocol, params, (a, b), keypair, min_key_bits)
        totals.append(time.perf_counter() - t0)
        sk = keypair[1]
        got = [int(v) for v in last.outputs["bob"].decrypt_ints(sk)]
        if got != [int(x < y) for x, y in zip(a, b)]:
            raise AssertionError(f"wrong comparison result at l = {bits}")
        walls.append(_phase_wall(last, "compare"))
    cost = last.cost
    compare_bytes = sum(
        p["phases"].get("compare", {}).get("bytes", {}).get("sent", 0)
        for p in cost.to_dict()["parties"].values()
    )
    return statistics.median(walls), cost.rounds, compare_bytes, statistics.median(totals)


def measure_argmax(
    protocol, keypair, k: int, min_key_bits: int, comparison: str = "dgk", reveal: str = "alice"
) -> tuple[float, int, float]:
    """(whole run seconds, rounds, Bob's tournament phase seconds) of a k-way argmax of
    64-bit values, with the ``comparison`` the protocol runs, revealed to ``reveal`` (with
    ``bob``, his phase ends with the output: Alice's evaluation is inside it)."""
    import secrets

    values = [secrets.randbelow(1 << 63) - (1 << 62) for _ in range(k)]
    t0 = time.perf_counter()
    result = _run(
        protocol,
        {"bits": 64, "count": k, "reveal_to": reveal, "comparison": comparison},
        values,
        keypair,
        min_key_bits,
    )
    elapsed = time.perf_counter() - t0
    if result.outputs[reveal] != values.index(max(values)):
        raise AssertionError("wrong argmax")
    return elapsed, result.cost.rounds, _phase_wall(result, "tournament")


# -- TNO ---------------------------------------------------------------------------------


class _QueueCommunicator:
    """TNO's Communicator protocol over asyncio queues, messages serialised by TNO."""

    def __init__(self, serialization):
        self._ser = serialization
        self._boxes: dict = {}

    def _box(self, msg_id):
        import asyncio

        return self._boxes.setdefault(msg_id, asyncio.Queue())

    async def send(self, party_id, message, msg_id):
        await self._box(msg_id).put(self._ser.pack(message, msg_id=msg_id, use_pickle=False))

    async def recv(self, party_id, msg_id):
        return self._ser.unpack(await self._box(msg_id).get())[1]


def tno_available() -> str | None:
    """None if TNO's package imports, else why not."""
    try:
        import tno.mpc.protocols.secure_comparison  # noqa: F401
    except Exception as e:  # ImportError or a broken dependency
        return f"{type(e).__name__}: {e}"
    return None


def measure_tno(key_bits: int, bit_lengths, count: int) -> dict:
    """Median ms per TNO comparison for each l, and the key generation times."""
    from tno.mpc.encryption_schemes.dgk import DGK
    from tno.mpc.encryption_schemes.paillier import Paillier
    from tno.mpc.encryption_schemes.utils import next_prime

    out: dict = {"ms_per_comparison": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        paillier = Paillier.from_security_parameter(key_length=key_bits)
        out["paillier_keygen_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        dgk = DGK.from_security_parameter(
            v_bits=160 if key_bits >= 2048 else 40,
            n_bits=key_bits,
            u=next_prime(1 << (max(bit_lengths) + 2)),
            full_decryption=False,
        )
        out["dgk_keygen_s"] = time.perf_counter() - t0
        try:
            for bits in bit_lengths:
                times = _tno_comparison_seconds(paillier, dgk, bits, count)
                out["ms_per_comparison"][bits] = 1000 * statistics.median(times)
        finally:
            paillier.shut_down()
            dgk.shut_down()
    return out


def _tno_comparison_seconds(paillier, dgk, bits: int, count: int) -> list[float]:
    """Seconds of each of ``count`` TNO comparisons of random l = ``bits`` inputs (after a
    warm-up one), every result checked."""
    import asyncio
    import secrets

    from tno.mpc.communication import Serialization
    from tno.mpc.protocols.secure_comparison import Initiator, KeyHolder

    comm = _QueueCommunicator(Serialization)
    initiator = Initiator(bits, communicator=comm, other_party="keyholder")
    keyholder = KeyHolder(
        bits,
        communicator=comm,
        other_party="initiator",
        scheme_paillier=paillier,
        scheme_dgk=dgk,
    )

    async def one(x, y):
        enc_x, enc_y = paillier.encrypt(x), paillier.encrypt(y)
        result, _ = await asyncio.gather(
            initiator.perform_secure_comparison(enc_x, enc_y),
            keyholder.perform_secure_comparison(),
        )
        return result

    async def timed():
        await one(1, 2)  # warm-up: schemes exchanged, pools started
        times, ok = [], True
        for _ in range(count):
            x, y = (secrets.randbelow(1 << (bits - 1)), secrets.randbelow(1 << (bits - 1)))
            t0 = time.perf_counter()
            result = await one(x, y)
            times.append(time.perf_counter() - t0)
            ok = ok and paillier.decrypt(result) == int(x <= y)
        return times, ok

    times, ok = asyncio.run(timed())
    if not ok:
        raise AssertionError(f"TNO returned a wrong comparison at l = {bits}")
    return times


# -- main --------------------------------------------------------------------------------


#: the timing of encrypting secret 1 bits against 0 bits must stay within 1 +- this
BIT_TIMING_TOLERANCE = 0.05


def bit_timing(dgk_sk, count: int = 512, repeats: int = 9) -> tuple[float, float]:
    """Median seconds to DGK-encrypt ``count`` one bits and ``count`` zero bits
    (interleaved, so drift of the machine hits both alike)."""
    from smc_hmm.crypto import Rng

    dgk_sk.encrypt([0, 1], Rng.seeded(0))  # tables built outside the timing
    ones, zeros = [], []
    for i in range(repeats):
        for bit, out in ((1, ones), (0, zeros)):
            rng = Rng.seeded(1000 + i)
            t0 = time.perf_counter()
            dgk_sk.encrypt([bit] * count, rng)
            out.append(time.perf_counter() - t0)
    return statistics.median(ones), statistics.median(zeros)


def main(args) -> int:
    from rich.console import Console

    _check(args)
    console = Console()
    with status(console, f"generating a throw-away {args.key_bits}-bit Paillier key pair"):
        keypair = common.throwaway_keypair(args.key_bits)
    dgk_sk, dgk_keygen = _dgk_key(keypair, max(args.bits), console)
    with console.status("timing the encryption of secret 1 and 0 bits"):
        ones, zeros = bit_timing(dgk_sk)
    ours, argmax, traffic = _measure(args, keypair, console)
    tno = _measure_baseline(args, console)
    ratio = ones / zeros
    rows = _rows(args, ours, tno, argmax, ones, zeros)
    rows.append(
        common.Row(
            f"garbled vs DGK: bytes per comparison, l={traffic['bits']}, k={traffic['batch']}",
            traffic["garbled_bytes_per_comparison"],
            traffic["dgk_bytes_per_comparison"],
            "B/cmp",
            note="the compare phase's traffic, both directions (the garbled setup's OT "
            "extension included)",
            better=common.LOWER,
        )
    )
    result = common.BenchResult(
        "compare",
        args.key_bits,
        rows,
        params={"bits": args.bits, "batch": args.batch, "repeats": args.repeats},
        extra={
            "ours": ours,
            "argmax": argmax,
            "traffic": traffic,
            "tno": tno,
            "dgk_keygen_s": dgk_keygen,
            "bit_timing": {"ones_s": ones, "zeros_s": zeros, "ratio": ratio},
        },
    )
    result.print_table(console)
    _print_key_generation(console, args.key_bits, dgk_keygen, tno)
    # the bit-timing ratio is reported, not a pass/fail: a busy machine moves it
    return common.finish(args, result, console)


def _check(args) -> None:
    """Every option in range (before any key is generated)."""
    common.check_key_bits(args)
    if args.batch < 1 or args.repeats < 1 or args.tno_count < 1 or args.argmax < 0:
        raise ConfigError("--batch, --repeats and --tno-count must be >= 1, --argmax >= 0")
    if any(not 1 <= b <= 100_000 for b in args.garbled_batches):
        raise ConfigError("--garbled-batches must be between 1 and 100000")
    if any(b < 1 for b in args.bits):
        raise ConfigError("--bits must be >= 1")


def _dgk_key(keypair, max_bits: int, console):
    """(DGK secret key, seconds to generate it) for ``keypair``'s size and inputs of up to
    ``max_bits`` (cached: the protocol runs reuse it)."""
    from smc_hmm.crypto.dgk import dgk_keypair_for

    with status(console, "generating the DGK key pair"), warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        t0 = time.perf_counter()
        _, dgk_sk = dgk_keypair_for(keypair[0], max_bits)  # cached: reused below
        return dgk_sk, time.perf_counter() - t0


def _print_key_generation(console, key_bits: int, dgk_keygen: float, tno: dict) -> None:
    console.print(f"DGK key generation ({key_bits} bits): {dgk_keygen:.2f} s")
    if "skipped" in tno:
        console.print(f"TNO baseline skipped: {tno['skipped']}")
    else:
        console.print(
            f"TNO key generation: Paillier {tno['paillier_keygen_s']:.1f} s, "
            f"DGK {tno['dgk_keygen_s']:.1f} s"
        )


def _measure(args, keypair, console) -> tuple[dict, dict | None, dict]:
    """Ours: per l, one comparison and a batch (after a warm-up run), and the argmax."""
    min_key_bits = min(args.key_bits, 2048)
    with status(console, "warm-up run (tables of both parties' keys)"):
        measure_ours(args.protocol, keypair, min(args.bits), 1, 1, min_key_bits)
    ours: dict = {}
    for bits in args.bits:
        with status(console, f"ours: l = {bits}, k = 1 and k = {args.batch}"):
            single = measure_ours(args.protocol, keypair, bits, 1, args.repeats, min_key_bits)
            batch = measure_ours(
                args.protocol, keypair, bits, args.batch, max(1, args.repeats // 2), min_key_bits
            )
        ours[bits] = {
            "single_ms": 1000 * single[0],
            "batched_ms_per_comparison": 1000 * batch[0] / args.batch,
            "rounds": batch[1],
            "single_bytes": single[2],
            "batched_bytes_per_comparison": batch[2] / args.batch,
            "single_run_s": single[3],
            "batched_run_s": batch[3],
        }
    for bits in args.bits:
        ours[bits]["garbled"] = _measure_garbled(args, keypair, bits, min_key_bits, console)
    argmax = _measure_argmax(args, keypair, min_key_bits, console) if args.argmax else None
    return ours, argmax, _measure_traffic(args, keypair, min_key_bits, console)


def _measure_garbled(args, keypair, bits: int, min_key_bits: int, console) -> dict:
    """The garbled comparison at l = ``bits`` per batch size of ``--garbled-batches``."""
    garbled = {}
    for batch in args.garbled_batches:
        with status(console, f"garbled: l = {bits}, k = {batch}"):
            run = measure_ours(
                args.protocol, keypair, bits, batch, args.repeats, min_key_bits, "garbled"
            )
        garbled[batch] = {
            "ms_per_comparison": 1000 * run[0] / batch,
            "rounds": run[1],
            "bytes_per_comparison": run[2] / batch,
            "run_s": run[3],
        }
    return garbled


def _measure_argmax(args, keypair, min_key_bits: int, console) -> dict:
    """The ``--argmax``-way argmax of 64-bit values, with DGK and (medians) garbled."""
    with status(console, f"ours: {args.argmax}-way argmax of 64-bit values"):
        seconds, rounds, _ = measure_argmax(
            args.argmax_protocol, keypair, args.argmax, min_key_bits
        )
    argmax = {"k": args.argmax, "seconds": seconds, "rounds": rounds}
    with status(console, f"garbled: {args.argmax}-way argmax of 64-bit values"):
        runs = [
            measure_argmax(
                args.argmax_protocol, keypair, args.argmax, min_key_bits, "garbled", "bob"
            )
            for _ in range(args.repeats)
        ]
    argmax["garbled"] = {
        "seconds": statistics.median(r[0] for r in runs),
        "tournament_s": statistics.median(r[2] for r in runs),
        "rounds": runs[0][1],
    }
    return argmax


def _measure_traffic(args, keypair, min_key_bits: int, console) -> dict:
    """Bytes per comparison, garbled and DGK, at l = BYTES_BITS and k = BYTES_BATCH."""
    with status(console, f"bytes per comparison: l = {BYTES_BITS}, k = {BYTES_BATCH}"):
        garbled = measure_ours(
            args.protocol, keypair, BYTES_BITS, BYTES_BATCH, 1, min_key_bits, "garbled"
        )
        dgk = measure_ours(args.protocol, keypair, BYTES_BITS, BYTES_BATCH, 1, min_key_bits)
    return {
        "bits": BYTES_BITS,
        "batch": BYTES_BATCH,
        "garbled_bytes_per_comparison": garbled[2] / BYTES_BATCH,
        "dgk_bytes_per_comparison": dgk[2] / BYTES_BATCH,
    }


def _measure_baseline(args, console) -> dict:
    """TNO's comparisons, or why they were skipped."""
    if args.no_tno:
        return {"skipped": "--no-tno"}
    if (why := tno_available()) is not None:
        return {"skipped": f"not importable ({why}); pip install {TNO_PIN}"}
    with status(console, "TNO: key generation (slow) and comparisons"):
        return measure_tno(args.key_bits, args.bits, args.tno_count)


def _rows(args, ours: dict, tno: dict, argmax: dict | None, ones: float, zeros: float):
    """Ours against TNO per l (k = 1 and batched), the bit timing and the argmax."""
    tno_ms = tno.get("ms_per_comparison", {})
    rows = _dgk_rows(args, ours, tno_ms)
    rows += _garbled_rows(args, ours, tno_ms)
    rows.append(
        common.Row(
            "DGK encryption of 512 secret bits: ones vs zeros",
            1000 * ones,
            1000 * zeros,
            "ms",
            note=f"ratio {ones / zeros:.3f}, target 1.00 +- {BIT_TIMING_TOLERANCE:.2f} "
            "(no branch on a bit)",
            better=common.LOWER,
        )
    )
    if argmax is not None:
        rows += _argmax_rows(argmax, args.key_bits >= TARGET_KEY_BITS)
    return rows


def _dgk_rows(args, ours: dict, tno_ms: dict) -> list:
    """The DGK comparison per l, one and a batch, against TNO's one call a comparison."""
    rows = []
    for bits, o in ours.items():
        base = tno_ms.get(bits)
        rows.append(
            common.Row(
                f"compare l={bits}, k=1",
                o["single_ms"],
                base,
                "ms/cmp",
                note="TNO: 1 call" if base is not None else "no baseline (TNO skipped)",
                better=common.LOWER,
            )
        )
        rows.append(
            common.Row(
                f"compare l={bits}, k={args.batch}",
                o["batched_ms_per_comparison"],
                base,
                "ms/cmp",
                target=BATCH_TARGET if base is not None else None,
                note=f"{o['rounds']} rounds, {o['batched_bytes_per_comparison']:.0f} B/cmp",
                better=common.LOWER,
            )
        )
    return rows


def _argmax_rows(argmax: dict, targeted: bool) -> list:
    """The argmax's whole run, and the garbled one's tournament (limits where ``targeted``:
    keys of TARGET_KEY_BITS and above)."""
    rows = [
        common.Row(
            f"argmax k={argmax['k']}, l=64 (whole run)",
            argmax["seconds"],
            None,
            "s",
            limit=ARGMAX_LIMIT_S if targeted else None,
            note=f"{argmax['rounds']} rounds",
        )
    ]
    g = argmax.get("garbled")
    if g is not None:
        rows.append(
            common.Row(
                f"garbled: {argmax['k']}-way argmax",
                g["tournament_s"],
                None,
                "s",
                limit=GARBLED_ARGMAX_LIMIT_S if targeted else None,
                note=f"Bob's tournament phase, revealed to him: shares, circuit and "
                f"Alice's evaluation (the OT extension runs in the setup); whole run "
                f"{g['seconds']:.3f} s with the base OT, {g['rounds']} rounds",
            )
        )
    return rows


def _garbled_rows(args, ours: dict, tno_ms: dict) -> list:
    """The garbled comparison per l and batch, against DGK (the same run: k = 1 against
    DGK's single comparison, larger batches against DGK's batch of ``--batch``) and TNO."""
    rows = []
    for bits, o in ours.items():
        for batch, g in o.get("garbled", {}).items():
            dgk = o["single_ms"] if batch == 1 else o["batched_ms_per_comparison"]
            big = batch >= GARBLED_TARGET_BATCH and args.key_bits >= TARGET_KEY_BITS
            dgk_k = 1 if batch == 1 else args.batch
            rows.append(
                common.Row(
                    f"garbled vs DGK: compare l={bits}, k={batch}",
                    g["ms_per_comparison"],
                    dgk,
                    "ms/cmp",
                    target=GARBLED_VS_DGK if big else None,
                    note=f"DGK at k={dgk_k}; {g['rounds']} rounds, "
                    f"{g['bytes_per_comparison']:.0f} B/cmp",
                    better=common.LOWER,
                )
            )
            base = tno_ms.get(bits)
            if base is not None:
                rows.append(
                    common.Row(
                        f"garbled vs TNO: compare l={bits}, k={batch}",
                        g["ms_per_comparison"],
                        base,
                        "ms/cmp",
                        target=GARBLED_VS_TNO if big else None,
                        note="TNO: 1 call a comparison",
                        better=common.LOWER,
                    )
                )
    return rows
