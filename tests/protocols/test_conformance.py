"""The conformance suite: every registered protocol (``smc_hmm.protocol.available()``) on
the small example its descriptor declares (``ProtocolDescriptor.example``).

Per protocol, from one in-process run per private-input set (recorded, and drawing from
exact offline pools where the descriptor plans its randomizers):

* the example hook is declared (a protocol without it fails here, by name);
* every party's output equals the plaintext reference (floats within the example's
  tolerance, from ``error_bound`` where declared);
* transcript invariance (the metadata rule): the runs on different private inputs of the
  same public sizes give identical frames once ciphertexts and declared revealed fields
  are masked (``tests/transcript_harness.py``);
* every ciphertext sent under a key the suite holds decrypts within its message's
  declared bound, and every one a key holder receives under her own key carries fresh
  randomness (two runs that differ only in the other parties' randomizers), and what
  she decrypts of a masked field is uniform on Z_n;
* the offline plan is exact where ``randomizers`` is declared: no pool runs dry, none
  is left over;
* a malformed peer message, and each of the example's malformed private inputs, end
  the run with a typed error (``smc_hmm.errors``), and a stalled peer is detected within
  a bounded time;
* one run from a parties.toml (the example's inputs as files, read by the roles'
  loaders) over TCP with mutual TLS, one party through the ``smc-hmm party`` command:
  outputs as the plaintext reference on what the loaders read.

A new protocol gets all of this by declaring ``example`` (``docs/adding-a-protocol.md``).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import msgpack
import numpy as np
import pytest
from deviation_support import Forwarding, HugeEntry, SentLog, WrongCiphertext, blob_count
from scipy import stats
from transcript_harness import (
    VIEW_P_MIN,
    Sends,
    assert_sends_within_bounds,
    assert_within_declared_bounds,
    bounded,
    compare_transcripts,
    masked,
    masked_residues,
    recorder,
    recording_sends,
    stale_ciphertexts,
)

from smc_hmm.crypto import Rng
from smc_hmm.errors import InsecureKeyWarning, SmcHmmError, TransportError
from smc_hmm.protocol import Example, ProtocolDescriptor, available, find, randomizers_by_key
from smc_hmm.runtime import run_protocol
from smc_hmm.transport.faults import FaultyTransport

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")

PROTOCOLS = sorted(available())
SEED = 52
#: a receive's timeout in the runs that should succeed or fail at once (a party that
#: raises closes every transport), and in the stalled run
TIMEOUT = 60.0
STALL_TIMEOUT = 0.25  # plus twice a healthy run's time


@cache
def _keypair(bits: int, index: int):
    from smc_hmm.crypto import generate_keypair

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyWarning)
        return generate_keypair(bits, insecure=True, rng=Rng.seeded(bits + 7919 * index))


@cache
def _descriptor(name: str) -> ProtocolDescriptor:
    return find(name)


@cache
def _example(name: str) -> Example:
    descriptor = _descriptor(name)
    if descriptor.example is None:
        pytest.fail(
            f"protocol {name!r} declares no example hook (ProtocolDescriptor.example): "
            "the conformance suite cannot run it"
        )
    example = descriptor.example(512, SEED)
    assert isinstance(example, Example), f"{name}: example() returned {type(example)}"
    return example


def _keys(name: str) -> dict:
    """A key pair for every party whose role holds the key (distinct keys)."""
    descriptor, example = _descriptor(name), _example(name)
    holders = [p for p, r in example.parties.items() if descriptor.role(r).holds_key]
    return {p: _keypair(example.key_bits, i) for i, p in enumerate(holders)}


def _run(name: str, index: int, mode: dict | None = None, **kwargs):
    """Run ``index`` of the example (with ``mode``'s parameters over the example's)."""
    example = _example(name)
    return run_protocol(
        name,
        example.params | (mode or {}),
        example.run_inputs(index),
        keys=_keys(name),
        min_key_bits=512,
        **{"timeout": TIMEOUT, **kwargs},
    )


# -- the example runs, once per protocol and input set ----------------------------------------


@dataclass
class Runs:
    results: list = field(default_factory=list)
    transcripts: list = field(default_factory=list)
    #: per run, per (party, key party) pool: (misses, left over), or None without a plan
    pools: list = field(default_factory=list)
    #: per run, per OT extension sender (Bob's garbler): (COTs extended, taken, extensions)
    ots: list = field(default_factory=list)
    seconds: float = 0.0


def _pools(name: str, index: int, mode: dict | None = None):
    """Exact offline pools for run ``index`` (:func:`~smc_hmm.runtime.offline.planned_pools`:
    every party under every key, none where the plan names neither, so a draw the plan
    missed is a miss): (pool per party and key party, run_protocol's ``randomizers``, how
    to restore the key holders' own randomizers), or None."""
    from smc_hmm.runtime.offline import by_fingerprint, planned_pools

    descriptor, example = _descriptor(name), _example(name)
    if descriptor.randomizers is None:
        return None
    keys = _keys(name)
    public = {p: pk for p, (pk, _) in keys.items()}
    params = descriptor.params(example.params | (mode or {}))
    inputs = {p: example.inputs[index].get(p) for p in example.parties}
    bits = next(iter(public.values())).bits
    need = randomizers_by_key(descriptor.randomizers(params, bits, inputs), public)
    made = {key for counts in need.values() for key in counts} - set(public)
    public |= _keys_made_in_the_run(name, index, made) if made else {}
    own = {p: public[p].randomizer for p in keys}
    pools = planned_pools(need, public, own, example.parties)

    def restore():
        for p, randomizer in own.items():
            public[p].use_randomizer(randomizer)

    flat = {(p, key): pool for p, mine in pools.items() for key, pool in mine.items()}
    return flat, by_fingerprint(pools, public), restore


def _keys_made_in_the_run(name: str, index: int, made: set) -> dict:
    """The public keys parties ``made`` make during run ``index`` (not given in ``keys``),
    by who made them: the sender of each key another party received, from a recorded run
    (the run's seeded generator makes the same keys each run)."""
    from smc_hmm.crypto import PublicKey

    given = {pk.fingerprint for pk, _ in _keys(name).values()}
    views = _run(name, index, record_views=True, rng=Rng.seeded(SEED)).views
    found = {}
    for received in views.values():
        for peer, _tag, payload in received:
            if isinstance(payload, PublicKey) and peer in made and payload.fingerprint not in given:
                found.setdefault(peer, payload)
    assert set(found) == made, f"{name}: the plan names keys no party sent: {made - set(found)}"
    return found


@contextmanager
def _ot_ledger():
    """Records, per garbler of the runs inside, the COTs its OT extension produced, the COTs
    its circuits took and how many extensions ran (the setup's, then any refill)."""
    from protocols.stages.garbled import Garbler

    ledger, extend, take = {}, Garbler._extend, Garbler._take

    def extending(self, ctx, count):
        ledger.setdefault(id(self), [0, 0, 0])
        ledger[id(self)][0] += count
        ledger[id(self)][2] += 1
        return extend(self, ctx, count)

    def taking(self, ctx, count):
        ledger.setdefault(id(self), [0, 0, 0])[1] += count
        return take(self, ctx, count)

    Garbler._extend, Garbler._take = extending, taking
    try:
        yield ledger
    finally:
        Garbler._extend, Garbler._take = extend, take


@cache
def _runs(name: str) -> Runs:
    runs = Runs()
    start = time.perf_counter()
    for index in range(len(_example(name).inputs)):
        frames, wrap = recorder()
        planned = _pools(name, index)
        try:
            with _ot_ledger() as ots:
                result = _run(
                    name,
                    index,
                    wrap_transport=wrap,
                    randomizers=planned[1] if planned else None,
                    rng=Rng.seeded(SEED),  # keys a party makes in the run are the same each run
                )
        finally:
            if planned:
                planned[2]()
        runs.results.append(result)
        runs.transcripts.append(dict(frames))
        runs.ots.append([tuple(v) for v in ots.values()])
        runs.pools.append(
            {p: (pool.misses, len(pool)) for p, pool in planned[0].items()} if planned else None
        )
    runs.seconds = time.perf_counter() - start
    return runs


def _close(got, want, tol: float, where: str) -> None:
    """``got`` equals ``want``: floats within ``tol``, containers element by element; a
    callable ``want`` is a predicate (an output that is random by design, e.g. DP)."""
    if callable(want):
        assert want(got), f"{where}: {got!r} fails {want}"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: {got!r} != {want!r}"
        for k in want:
            _close(got[k], want[k], tol, f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple, np.ndarray)) and not isinstance(want, str):
        got_list, want_list = (
            list(np.asarray(got, dtype=object)),
            list(np.asarray(want, dtype=object)),
        )
        assert len(got_list) == len(want_list), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got_list, want_list)):
            _close(g, w, tol, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert isinstance(got, (int, float, np.floating)), f"{where}: {got!r} != {want!r}"
        if math.isinf(want):
            assert got == want, f"{where}: {got!r} != {want!r}"
        else:
            assert abs(float(got) - want) <= tol, f"{where}: {got!r} != {want!r} (tol {tol})"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


# -- the checks --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROTOCOLS)
def test_the_example_hook_is_declared(name):
    example = _example(name)
    descriptor = _descriptor(name)
    assert set(example.parties.values()) <= set(descriptor.role_names)
    assert len(example.inputs) >= 2


@pytest.mark.parametrize("name", PROTOCOLS)
def test_outputs_equal_the_plaintext_reference(name):
    example, runs = _example(name), _runs(name)
    for index, result in enumerate(runs.results):
        want = example.expected(example.inputs[index])
        assert want, f"{name}: the example expects no output"
        for party, output in want.items():
            _close(result[party], output, example.tolerance, f"{name} run {index} {party}")


@pytest.mark.parametrize("name", PROTOCOLS)
def test_transcripts_depend_only_on_public_sizes(name):
    declared = _declarations(name)
    example = _example(name)
    transcripts = _runs(name).transcripts
    assert len(transcripts) >= 2, f"{name}: one input set compares nothing"
    frames = compare_transcripts(transcripts, declared)  # fails at the first differing frame
    talking = {party for link in frames for party in link}
    assert set(example.parties) <= talking, f"{name}: a party took no part: {sorted(talking)}"


PLANNED = [n for n in PROTOCOLS if _descriptor(n).randomizers is not None]


@pytest.mark.parametrize("name", PLANNED)
def test_the_offline_plan_is_exact(name):
    """Pools filled from the descriptor's plan alone cover every run with none left; the
    OT extension of every garbled session runs once, in the setup, for exactly the COTs
    its circuits take (a refill would be a budget the plan missed, a leftover one it
    overcounted)."""
    for index, sessions in enumerate(_runs(name).ots):
        for extended, taken, extensions in sessions:
            assert (extended, extensions) == (taken, 1 if taken else 0), (
                f"{name} run {index}: {extensions} OT extension(s) of {extended} COTs in "
                f"all for {taken} taken"
            )
    for index, pools in enumerate(_runs(name).pools):
        assert pools, f"{name}: the plan names no party"
        for (party, key), (misses, left) in pools.items():
            assert (misses, left) == (0, 0), (
                f"{name} run {index}: {party}'s pool under {key}'s key missed {misses} and "
                f"kept {left}"
            )


def _declarations(name: str) -> list:
    """Every message of the example's runs, as the descriptor (or the example) declares
    them."""
    descriptor, example = _descriptor(name), _example(name)
    if descriptor.messages is None:
        return list(example.declared)
    return list(descriptor.messages(descriptor.params(example.params), example.key_bits))


@pytest.mark.parametrize("name", PROTOCOLS)
def test_every_ciphertext_decrypts_within_its_declared_bound(name):
    """Every ciphertext sent under a key the suite holds decrypts to a plaintext within
    its message's declared bound.  The bounds the roles assert by hand
    (``CipherArray.with_bound``: a packing's slots, a value's range) decide whether a
    packed slot or a homomorphic sum can wrap; a bound asserted tighter than the values
    would silently disable that check, and this finds it on real runs.  Keys a party
    makes during the run (the eigenvector owners' own keys) are not the suite's: their
    ciphertexts are the one part it cannot open.  A protocol whose every ciphertext is
    masked over Z_n (``compare``, ``argmax``) declares no bound."""
    declared = _declarations(name)
    opened = assert_within_declared_bounds(_runs(name).transcripts, declared, _keys(name).values())
    tags = [m.tag for m in declared if any(bounded(f) for f in m.fields)]
    assert opened or not tags, f"{name}: no ciphertext of {tags} was opened"


@pytest.mark.parametrize("name", PROTOCOLS)
def test_what_a_key_holder_decrypts_of_masked_fields_is_uniform_on_z_n(name):
    """Every field declared :class:`MaskedCiphertexts` is, as the defaults claim, uniform
    on Z_n for the key holder who decrypts it (a slot mask narrower than its slot, or a
    missing top mask, puts values in a corner of Z_n: the KS test sees it at once).  A
    protocol that declares no such field has nothing to test here; one that declares
    some must show the suite some."""
    declared = _declarations(name)
    first = _runs(name).transcripts[:1]  # the runs share a seed: their masks repeat
    residues = masked_residues(first, declared, _keys(name).values())
    fields = [m.tag for m in declared if any(masked(f) for f in m.fields)]
    assert bool(residues) == bool(fields) or name in _NO_WHOLE_KEY_HOLDER, (name, fields)
    if len(residues) >= 5:
        assert stats.kstest(residues, "uniform").pvalue > VIEW_P_MIN, name


MASKED = [n for n in PROTOCOLS if any(masked(f) for m in _declarations(n) for f in m.fields)]


@pytest.mark.parametrize("name", MASKED)
def test_a_huge_entry_leaves_what_the_key_holder_decrypts_uniform(name):
    """The attack that twice read Bob's values above the packed slots, on every protocol
    at once: the key holder encrypts 2^L (L = bits(n) - 64) as the first entry of her
    first bounded message.  Whatever Bob computes from it, every masked field she then
    decrypts stays uniform on Z_n (each slot masked over its width, a top mask above),
    where without a top mask it would carry 2^L times his values.  The run may end in
    a refusal (the binding check); what she received before it is what counts.  Without
    the top masks this fails for match, keyword, speaker and viterbi (her residues sit
    within 2^-13 of 0 or 1); ``linear``'s weights are wide enough that 2^L W wraps, so
    its own test (``test_garbled_stage.py``, ``test_a_huge_input_shows_nothing_...``)
    puts L just above its slots instead."""
    holder, (pk, _) = next(iter(_keys(name).items()))
    declared = {m.tag: m for m in _declarations(name)}
    frames, record = recorder()

    forgers = []

    def wrap(party, transport):
        recorded = record(party, transport)
        if party != holder:
            return recorded
        forgers.append(HugeEntry(recorded, pk, declared, bounded))
        return forgers[-1]

    with contextlib.suppress(SmcHmmError):  # a refusal (the binding check) may end it
        _run(name, 0, wrap_transport=wrap)
    if not any(f.done for f in forgers):
        assert name in _NO_CIPHERTEXTS_OF_HERS, f"{name}: {holder} sent no bounded ciphertext"
        return
    seen = {link: f for link, f in frames.items() if link[0] == holder}
    residues = masked_residues([seen], declared.values(), _keys(name).values())
    assert residues, f"{name}: no masked value reached {holder}"
    assert stats.kstest(residues, "uniform").pvalue > VIEW_P_MIN, (name, residues[:4])


#: protocols whose key holder sends no bounded ciphertext (Bob holds both operands of
#: ``compare`` and ``argmax``): the huge entry has nowhere to go
_NO_CIPHERTEXTS_OF_HERS = {"compare", "argmax"}


@cache
def _fixed_draws_runs(name: str, mode: tuple) -> tuple[dict, dict, Sends]:
    """Two runs of :func:`_fixed_draws_run` with the same draws of the key holders'
    (their frames), and what they sent (:func:`recording_sends`: the declarations they
    used, which ``mode``'s may be, and every bounded field)."""
    draws: dict = {}
    with recording_sends() as sends:
        first, second = (_fixed_draws_run(name, dict(mode), draws) for _ in range(2))
    return first, second, sends


def _fixed_draws_run(name: str, mode: dict, draws: dict) -> dict:
    """Run 0 (in ``mode``) from planned pools in which every key holder's own randomizers
    are ``draws[party]`` (filled in by the first call), every other party's fresh, and
    every other random choice seeded as in :func:`_runs`: its recorded frames."""
    flat, randomizers, restore = _pools(name, 0, mode)
    for (party, key), pool in flat.items():
        if party == key:
            mine = pool.draw(len(pool))
            pool.offer(draws.setdefault(party, mine))
    frames, wrap = recorder()
    try:
        _run(name, 0, mode, wrap_transport=wrap, randomizers=randomizers, rng=Rng.seeded(SEED))
    finally:
        restore()
    return dict(frames)


#: the thesis's semi-honest modes, named explicitly, on the same examples (the freshness
#: check runs on them as on the defaults; spot's dgk mode is viterbi's decoding on a
#: longer example, a minute of runs, so viterbi's stands for both)
THESIS_MODES = [
    ("keyword", {"scoring": "forward"}),
    ("forward", {"recursion": "v1"}),
    ("speaker", {"scoring": "logsum"}),
    ("viterbi", {"comparison": "dgk"}),
    ("match", {"comparison": "dgk"}),
    ("compare", {"comparison": "dgk"}),
    ("argmax", {"comparison": "dgk"}),
]
FRESHNESS = [(name, {}) for name in PLANNED] + THESIS_MODES


def _mode_ids(cases) -> list[str]:
    """A test id per (protocol, mode): ``viterbi-dgk``; a default is the name alone."""
    return [name + "".join(f"-{v}" for v in mode.values()) for name, mode in cases]


@pytest.mark.parametrize(
    ("name", "mode"),
    FRESHNESS,
    ids=_mode_ids(FRESHNESS),
)
def test_every_ciphertext_a_key_holder_receives_carries_fresh_randomness(name, mode):
    """A ciphertext computed from the key holder's own ciphertexts and sent back to her
    without fresh randomness has randomizer prod rho_i^(w_i): a function of her own
    randomizers and of the sender's secret weights, which she can read off with her key.
    Two runs in which her randomizers and every other random choice are the same, and
    only the other parties' Paillier randomizers differ, must show her no ciphertext
    twice, other than a trivial encryption 1 + m n (randomizer 1, which says nothing).
    Every such message must be declared ``fresh`` or re-randomised
    (:func:`transcript_harness.stale_ciphertexts`).  On the defaults and on the thesis's
    modes (``THESIS_MODES``); Paillier only: DGK's randomness comes from the seeded
    generator, the same in both runs."""
    first, second, _ = _fixed_draws_runs(name, tuple(mode.items()))
    stale, compared = stale_ciphertexts(first, second, _keys(name))
    assert not stale, f"{name}: ciphertexts without fresh randomness: {sorted(set(stale))}"
    assert bool(compared) != (name in _NO_WHOLE_KEY_HOLDER), f"{name}: {compared} compared"


DEVIATIONS = [(n, {}) for n in PROTOCOLS] + THESIS_MODES


@pytest.mark.parametrize(
    ("name", "mode"),
    DEVIATIONS,
    ids=_mode_ids(DEVIATIONS),
)
def test_a_deviating_peer_learns_at_most_whether_the_key_holder_aborts(name, mode):
    """A peer deviates: one ciphertext it sends the key holder (in its first such frame,
    then a third of the way, two thirds, and its last) is an encryption of a random
    value; the peer is whoever sends her the most ciphertexts under her key.  Whatever
    she then does -- answer, or refuse -- she sends every frame of an honest run unless
    someone stops first, and the frames she sends must not depend on her private input:
    the runs on the example's two input sets, each with the same deviation, give the
    same frames once ciphertexts and revealed fields are masked.  A check of hers on a
    value that mixes the forged one with her data, raised at once instead of after her
    last message, shows here as a run she cut short.  On every protocol's default and
    on the thesis's modes (their LOGSUM checks, raised at once until this test found
    it, told a deviating Bob the step at which her values made his forged reply fail)."""
    holder, (pk, _) = next(iter(_keys(name).items()))
    first, _, honest = _fixed_draws_runs(name, tuple(mode.items()))  # honest, in ``mode``
    counts = {
        sender: sum(1 for frame in frames if blob_count(frame, pk))
        for (receiver, sender), frames in first.items()
        if receiver == holder
    }
    if not any(counts.values()):
        assert name in _NO_WHOLE_KEY_HOLDER, f"{name}: nobody sends {holder} a ciphertext"
        return
    peer = max(counts, key=lambda sender: (counts[sender], sender))
    sends = sum(len(frames) for (_, sender), frames in first.items() if sender == holder)
    count = counts[peer]
    for at in sorted({0, count // 3, 2 * count // 3, count - 1}):
        whole = []
        for index in range(len(_example(name).inputs)):
            logs = []

            def wrap(party, transport, at=at, logs=logs):
                if party == peer:
                    return WrongCiphertext(transport, holder, pk, at)
                if party == holder:
                    logs.append(SentLog(transport))
                    return logs[-1]
                return transport

            with contextlib.suppress(SmcHmmError):
                _run(name, index, mode, wrap_transport=wrap)
            (log,) = logs
            if log.cut:  # someone else stopped first: where is their choice
                continue
            sent = sum(len(frames) for frames in log.frames.values())
            assert sent == sends, (
                f"{name} {mode} input {index}, {peer}'s ciphertext forged at {at}: she "
                f"stopped after {sent} of her {sends} frames while the others still waited"
            )
            whole.append(log.links())
        if len(whole) > 1:
            compare_transcripts(whole, honest.messages.values())


#: protocols in which no party receives ciphertexts under a key the suite holds whole:
#: the eigenvector's shared key (the suite's, given to its key authority) is split
#: between Trent and the leader, and its owners' own keys are made during the run
_NO_WHOLE_KEY_HOLDER = {"eigenvector"}


@pytest.mark.parametrize(("name", "mode"), THESIS_MODES, ids=_mode_ids(THESIS_MODES))
def test_the_thesis_modes_keep_their_declared_bounds(name, mode):
    """:func:`test_every_ciphertext_decrypts_within_its_declared_bound` on the thesis's
    modes (their LOGSUM, DGK and rescaling messages assert the most bounds by hand),
    against the declarations the freshness check's runs sent under."""
    sends = _fixed_draws_runs(name, tuple(mode.items()))[2]
    opened = assert_sends_within_bounds(sends, _keys(name).values())
    assert opened, f"{name} in {mode}: no ciphertext was opened"


class _Malformed(Forwarding):
    """Receives frame ``index`` from ``peer`` with its body replaced by ``body``."""

    def __init__(self, inner, peer: str, index: int, body):
        super().__init__(inner)
        self.peer, self.index, self.body, self.seen = peer, index, body, 0

    def recv_bytes(self, peer, timeout):
        frame = self.inner.recv_bytes(peer, timeout)
        if peer == self.peer:
            self.seen += 1
            if self.seen - 1 == self.index:
                envelope = msgpack.unpackb(frame, raw=False)
                envelope["b"] = self.body
                frame = msgpack.packb(envelope, use_bin_type=True)
        return frame


def _busiest_link(name: str):
    frames = _runs(name).transcripts[0]
    return max(frames, key=lambda link: (len(frames[link]), link))


@pytest.mark.parametrize("body", [["malformed"], {"shape": [10**9]}], ids=["list", "map"])
@pytest.mark.parametrize("name", PROTOCOLS)
def test_a_malformed_peer_message_is_a_typed_error(name, body):
    """The middle frame of the busiest link arrives with a body of the wrong form."""
    receiver, sender = _busiest_link(name)
    index = len(_runs(name).transcripts[0][(receiver, sender)]) // 2

    def wrap(party, transport):
        return _Malformed(transport, sender, index, body) if party == receiver else transport

    with pytest.raises(SmcHmmError):
        _run(name, 0, wrap_transport=wrap, timeout=TIMEOUT)


@pytest.mark.parametrize("name", PROTOCOLS)
def test_malformed_private_inputs_are_typed_errors(name):
    example = _example(name)
    assert example.bad_inputs, f"{name}: the example declares no bad_inputs"
    for bad in example.bad_inputs:
        with pytest.raises(SmcHmmError):
            run_protocol(
                name,
                example.params,
                example.run_inputs(0, bad),
                keys=_keys(name),
                min_key_bits=512,
                timeout=TIMEOUT,
            )
            pytest.fail(f"{name} accepted the bad input {sorted(bad)}: {bad}")


@pytest.mark.parametrize("name", PROTOCOLS)
def test_a_stalled_peer_is_detected_within_the_timeout(name):
    """The sender of the busiest link hangs halfway through its sends: every party ends
    with a transport error within a receive's timeout (plus the run's own work).  The
    timeout exceeds any wait of a healthy run (twice the whole run's time), so the error
    is the stall's."""
    _, sender = _busiest_link(name)
    runs = _runs(name)
    sends = sum(len(f) for (_, s), f in runs.transcripts[0].items() if s == sender)
    per_run = runs.seconds / len(runs.results)
    timeout = STALL_TIMEOUT + 2 * per_run
    faults = []

    def wrap(party, transport):
        if party != sender:
            return transport
        faults.append(FaultyTransport(transport, fail_at=sends // 2, mode="stall"))
        return faults[-1]

    t0 = time.monotonic()
    with pytest.raises(TransportError):
        _run(name, 0, wrap_transport=wrap, timeout=timeout)
    elapsed = time.monotonic() - t0
    assert faults[0].triggered, f"{name}: the run failed before the stall"
    assert elapsed < 2 * timeout + 3.0, elapsed


def _party_thread(name, config, results, errors):
    from smc_hmm.runtime import run_party

    def run():
        try:
            results[name] = run_party(name, config)
        except SmcHmmError as e:  # reported by the test's assertions
            errors[name] = e

    return threading.Thread(target=run, name=f"conformance-{name}")


@pytest.mark.parametrize("name", PROTOCOLS)
def test_a_parties_toml_run_over_tcp_with_mutual_tls_and_the_cli(name, tmp_path, capsys):
    """The example's inputs as a parties.toml (files the roles' loaders read): every
    party over TCP with mutual TLS on loopback, the first through ``smc-hmm party``, the
    others through ``run_party`` in threads; outputs as the plaintext reference on the
    loaded inputs."""
    from smc_hmm.cli import main
    from smc_hmm.runtime import load_config, write_config

    descriptor, example = _descriptor(name), _example(name)
    assert example.config is not None, f"{name}: the example declares no config"
    tables = example.config(tmp_path)
    assert set(tables) == set(example.parties), f"{name}: config for {sorted(tables)}"
    for party, role in example.parties.items():
        tables[party] = {"kind": descriptor.role(role).kind, "role": role, **tables[party]}
    path = write_config(
        tmp_path / "parties.toml",
        name,
        tables,
        params=example.params,
        key_bits=example.key_bits,
        insecure=True,
        timeout=TIMEOUT,
        connect_timeout=30,
    )
    config = load_config(path)
    loaded = {
        p: config.private_input(descriptor.role(r), config.party(p))
        for p, r in example.parties.items()
    }
    first, *others = example.parties
    results, errors = {}, {}
    threads = [_party_thread(p, config, results, errors) for p in others]
    for t in threads:
        t.start()
    code = main(["party", "--role", first, "--config", str(path), "--quiet",
                 "--json", str(tmp_path / "first.json")])  # fmt: skip
    for t in threads:
        t.join(TIMEOUT * 2)
    assert code == 0 and not errors, (capsys.readouterr().err, errors)
    results[first] = json.loads((tmp_path / "first.json").read_text())
    assert all(r["ok"] for r in results.values())
    for party, output in example.expected(loaded).items():
        _close(results[party]["output"], output, example.tolerance, f"{name} {party}")


def test_the_walkthrough_shows_the_linear_module_as_it_is():
    """docs/adding-a-protocol.md builds protocols/linear.py: its marked code blocks are
    the module's own code, and together they show every line of it."""
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "adding-a-protocol.md").read_text(encoding="utf-8")
    module = (root / "protocols" / "linear.py").read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- protocols/linear.py -->\n```python\n(.*?)```", doc, re.S)
    assert blocks, "no block of protocols/linear.py in the walkthrough"
    for block in blocks:
        assert block in module, f"the walkthrough's block is not the module's:\n{block}"
    shown = "".join(blocks)
    missing = [line for line in module.splitlines() if line.strip() and line not in shown]
    assert not missing, f"lines of protocols/linear.py the walkthrough does not show: {missing}"
