"""The garbled stage end to end in-process: comparisons and argmax equal plaintext in
every reveal mode, the pool of random OTs refills, the transcripts follow from public
sizes only, and a cheating or broken peer ends the session with a typed error."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from deviation_support import Forwarding
from party_support import simulate_alice_and_bob
from transcript_harness import assert_same_transcripts

from protocols.stages import bound as bd
from protocols.stages import circuits, garbled
from smc_hmm.crypto import CipherArray
from smc_hmm.errors import GarbledCircuitError, OtConsistencyError, ProtocolError
from smc_hmm.messages import Key, Message
from smc_hmm.runtime import simulate

BITS = 16
PK = Message("test.pk", Key())


def _run(keypair, a, b, reveal, cots=64, wrap=None, bob_extra=None):
    pk, sk = keypair
    k = len(a)

    def bob(ctx):
        assert ctx.recv("alice", PK) == pk
        g = garbled.bob_setup(ctx, cots)
        ea = CipherArray.encrypt_encoded(pk, np.array(a, dtype=object), 0, (1 << (BITS - 1)) - 1)
        eb = CipherArray.encrypt_encoded(pk, np.array(b, dtype=object), 0, (1 << (BITS - 1)) - 1)
        out = circuits.bob_compare(ctx, g, ea, eb, BITS, reveal=reveal)
        if reveal == "none":
            return ("encrypted", out)
        arg = circuits.bob_argmax(ctx, g, ea, BITS, reveal=reveal)
        return (out, arg)

    def alice(ctx):
        ctx.send("bob", PK, pk)
        e = garbled.alice_setup(ctx, cots)
        out = circuits.alice_compare(ctx, e, k, BITS, reveal=reveal)
        if reveal == "none":
            return None
        return (out, circuits.alice_argmax(ctx, e, k, BITS, reveal=reveal))

    return simulate_alice_and_bob(alice, bob, keypair, seed=5, wrap_transport=wrap, timeout=20)


def _cases():
    lo, hi = -(1 << (BITS - 1)) + 1, (1 << (BITS - 1)) - 1
    a = [0, 5, -5, lo, hi, 7, 7, 100, -3, hi]
    b = [0, 4, -4, hi, lo, 7, 8, -100, -3, hi - 1]
    return a, b


@pytest.mark.parametrize("reveal", ["alice", "bob", "none"])
def test_comparisons_and_argmax_equal_plaintext(keypair_512, reveal):
    a, b = _cases()
    result = _run(keypair_512, a, b, reveal)
    expected = [int(x < y) for x, y in zip(a, b)]
    _, sk = keypair_512
    if reveal == "none":
        enc = result.outputs["bob"][1]
        assert [int(v) for v in enc.decrypt_ints(sk)] == expected
        return
    holder = result.outputs[reveal]
    bits, index = holder
    assert list(bits) == expected
    assert index == int(np.argmax(a))  # ties: the first of the maxima (a[4] == a[9])
    other = result.outputs["bob" if reveal == "alice" else "alice"]
    assert other == (None, None)


def test_the_pool_refills_when_a_circuit_needs_more_ots(keypair_512):
    a, b = _cases()
    result = _run(keypair_512, a, b, "alice", cots=3)  # far fewer than the circuits take
    assert list(result.outputs["alice"][0]) == [int(x < y) for x, y in zip(a, b)]
    ots = result.cost.parties["bob"]["ops"]["cot"]
    assert ots >= 3 + garbled.EXTEND_CHUNK


def test_the_cost_ledger_counts_gates_bytes_and_ots(keypair_512):
    a, b = _cases()
    result = _run(keypair_512, a, b, "bob")
    ops = result.cost.parties["bob"]["ops"]
    k = len(a)
    assert ops["and_gates"] == circuits.compare_circuit(k, BITS, "bob", 40).and_gates + (
        circuits.argmax_circuit(k, BITS, "bob").and_gates
    )
    assert ops["and_gates"] >= k * BITS
    assert ops["garbled_bytes"] >= 32 * ops["and_gates"]
    assert ops["cot"] >= 2 * k * BITS


@pytest.mark.parametrize("reveal", ["alice", "bob", "none"])
def test_frames_follow_from_public_sizes_only(keypair_512, reveal):
    decl = list(garbled.setup_messages(64).values())
    if reveal == "none":
        decl += list(garbled.circuit_messages(circuits.compare_circuit(10, BITS, reveal)).values())
    else:  # bound shares: the comparison's, then the argmax's (same tags)
        plan = bd.SharePlan(10, BITS + 1, 40)
        decl += bd.shared_messages(plan, circuits.compare_circuit(10, BITS, reveal, 40), "cmp")
    rng = np.random.default_rng(0)
    lim = 1 << (BITS - 2)
    inputs = [
        (list(rng.integers(-lim, lim, 10)), list(rng.integers(-lim, lim, 10))) for _ in range(2)
    ]
    inputs.append(_cases())
    assert_same_transcripts(
        lambda ab, wrap: _run(
            keypair_512, [int(v) for v in ab[0]], [int(v) for v in ab[1]], reveal, wrap=wrap
        ),
        inputs,
        decl,
        keys=[keypair_512],
    )


class _Tamper(Forwarding):
    """Wraps a transport and corrupts the first frame of one tag that one party sends."""

    def __init__(self, inner, tag: str, corrupt):
        super().__init__(inner)
        self.tag, self.corrupt, self.done = tag, corrupt, False

    def send_bytes(self, peer, frame):
        env = msgpack.unpackb(frame, raw=False, strict_map_key=False)
        if not self.done and env.get("t") == self.tag:
            self.done = True
            env["b"] = self.corrupt(env["b"])
            frame = msgpack.packb(env, use_bin_type=True)
        self.inner.send_bytes(peer, frame)


def _flip_first_byte(body):
    if isinstance(body, list | tuple):
        return [_flip_first_byte(body[0]), *body[1:]]
    return bytes([body[0] ^ 1]) + body[1:]


def _flip_every_table(body):
    """Every row of every AND table changed (a single row is used only on half the paths:
    a change on a path not taken changes nothing, and the output is still right)."""
    tables = bytes(b ^ 0x5A for b in body[0])
    return [tables, *body[1:]]


@pytest.mark.parametrize(
    ("sender", "tag", "corrupt", "error"),
    [
        ("alice", "gc.ext_u", _flip_first_byte, OtConsistencyError),  # a cheating OT receiver
        ("alice", "gc.ext_proof", _flip_first_byte, OtConsistencyError),
        ("alice", "gc.outputs", _flip_first_byte, GarbledCircuitError),  # a forged output label
        ("bob", "gc.tables", _flip_every_table, GarbledCircuitError),  # corrupted tables
        ("bob", "gc.tables", lambda body: [body[0][:-16], *body[1:]], ProtocolError),  # short
        ("alice", "gc.choice", lambda body: body + b"\0", ProtocolError),  # wrong length
    ],
)
def test_a_corrupted_message_ends_the_session_with_a_typed_error(
    keypair_512, sender, tag, corrupt, error
):
    a, b = _cases()

    def wrap(name, transport):
        return _Tamper(transport, tag, corrupt) if name == sender else transport

    with pytest.raises(error):
        _run(keypair_512, a, b, "bob", wrap=wrap)


def _corrupt_decoding(wire: int, value: int):
    """Bob's probe of one of Alice's output bits: the decoding hash of ``value`` on output
    ``wire`` replaced, so that her label decodes iff her bit there is not ``value``."""

    def corrupt(body):
        decoding = bytearray(body[2])  # (outputs, 2) 64-bit hashes
        at = 8 * (2 * wire + value)
        decoding[at] ^= 1
        return [body[0], body[1], bytes(decoding)]

    return corrupt


@pytest.mark.parametrize("wire", [0, 1, 3])
def test_a_selective_failure_on_an_output_costs_alice_one_abort_at_the_end(keypair_512, wire):
    """A Bob who corrupts one decoding hash of one output wire (only the label of bit 1
    fails to decode) learns whether Alice's bit there is 1 -- and nothing more: she sends
    every message she would have sent (Bob sees the same tags in the same order, the
    argmax circuit after it included) and raises only after her last message."""
    a, b = _cases()
    expected = [int(x < y) for x, y in zip(a, b)]
    honest = _run(keypair_512, a, b, "alice")
    tags = []

    def wrap(name, transport):
        if name != "bob":
            return transport
        # her outputs: ok, then the bits
        return _Tamper(_Recorder(transport, tags), "gc.tables", _corrupt_decoding(wire + 1, 1))

    if expected[wire]:
        with pytest.raises(GarbledCircuitError):
            _run(keypair_512, a, b, "alice", wrap=wrap)
    else:
        bits, index = _run(keypair_512, a, b, "alice", wrap=wrap).outputs["alice"]
        assert list(bits) == list(honest.outputs["alice"][0]) == expected
        assert index == honest.outputs["alice"][1]
    honest_tags = []
    _run(
        keypair_512, a, b, "alice", wrap=lambda n, t: _Recorder(t, honest_tags) if n == "bob" else t
    )
    assert tags == honest_tags  # her abort is the one bit: every message of hers arrived


def test_a_share_past_its_bound_gives_a_probing_bob_nothing(keypair_512, monkeypatch):
    """Bob's software shifts one value he shares beyond its declared bound (before
    2026-12-06 whether a masked value left its range could depend on her data, and she
    deferred an abort).  Every slot she decrypts now spans its whole range, so nothing
    she sees is out of range: she aborts never, sends every message, and the tags Bob
    receives are the honest run's."""
    a, b = _cases()
    tags, honest_tags = [], []
    _run(
        keypair_512, a, b, "alice", wrap=lambda n, t: _Recorder(t, honest_tags) if n == "bob" else t
    )
    real = circuits.bob_share

    def shifted(ctx, values, bits, sigma, *args, **kwargs):
        far = np.zeros(values.size, dtype=object)  # one masked value past its bound
        far[3] = 1 << (bits + sigma)
        far = far.reshape(values.shape)
        return real(ctx, values.add_encoded(far).with_bound(values.bound), bits, sigma, *args,
                    **kwargs)  # fmt: skip

    monkeypatch.setattr(circuits, "bob_share", shifted)
    _run(keypair_512, a, b, "alice", wrap=lambda n, t: _Recorder(t, tags) if n == "bob" else t)
    assert tags == honest_tags


class _Recorder(Forwarding):
    """Wraps a transport and records the tags it receives."""

    def __init__(self, inner, tags):
        super().__init__(inner)
        self.tags = tags

    def recv_bytes(self, peer, timeout):
        frame = self.inner.recv_bytes(peer, timeout)
        self.tags.append(msgpack.unpackb(frame, raw=False, strict_map_key=False)["t"])
        return frame


def test_a_huge_input_shows_nothing_of_bobs_coefficients_and_the_unmasked_top_leaks_them(
    keypair_1024, monkeypatch
):
    """Deviation: in ``linear`` Bob's score is his weights times Alice's ciphertexts, and
    her software encrypts 2^L as feature 0, L above every share slot: E(S) = E(W_0 2^L +
    ...).  What she decrypts of the decision stage's shares is uniform on Z_n (the slots'
    masks over their whole width and the top mask, :func:`garbled.masked_groups`): her
    reading above the slots is not W_0.  The control, the same stage without the top
    mask, hands her W_0 exactly."""
    from protocols import linear
    from smc_hmm.crypto import CipherArray
    from smc_hmm.crypto.packing import horner_pack

    params, shift = linear.Params(), 700
    model = [1.25, -2.5, 3.0, 0.5, 1.0]  # W at scale 16, then theta
    weight = linear.split(model, params)[0][0]

    def deviating(ctx, _):  # her own software: E(2^L) as feature 0, claimed within bounds
        (key, features, *_), pk = params.messages(), ctx.keypair[0]
        ctx.send("bob", key, pk)
        forged = CipherArray.encrypt_encoded(pk, [1 << shift, 0, 0, 0], params.scale)
        ctx.send("bob", features, CipherArray(pk, forged.data, params.scale, params.bound))
        ctx.defer = lambda error: None  # her software ignores the failed range check
        linear.alice_decide(ctx, params.decision, "bob")

    def reading():
        run = simulate(
            {"alice": deviating, "bob": linear.bob},
            {"alice": (None,), "bob": (model, params)},
            keys={"alice": keypair_1024}, min_key_bits=512, record_views=True,
        )  # fmt: skip
        (share,) = [p[0] for _, t, p in run.views["alice"] if t == "dec.share"]
        n = int(keypair_1024[0].n)
        value = int(share.decrypt_ints(keypair_1024[1])[0]) % n
        value = value - n if value > n // 2 else value
        return (value + (1 << (shift - 1))) >> shift

    assert abs(reading() - weight) > 256  # uniform above the slots
    monkeypatch.setattr(garbled, "masked_groups", lambda masked, w, per, rng: horner_pack(
        masked, w, per))  # fmt: skip
    assert reading() == weight


def test_a_large_draw_runs_as_several_extensions_each_within_the_frame_limit(
    keypair_512, monkeypatch
):
    """More than MAX_EXTEND random COTs run as several extensions (each checked), so no
    extension message outgrows the wire's frame limit; the labels still correlate."""
    from smc_hmm.gc.ot import OtExtReceiver, u_bytes
    from smc_hmm.wire import DEFAULT_MAX_FRAME_BYTES

    assert garbled.extension_parts(2 * garbled.MAX_EXTEND + 5) == [garbled.MAX_EXTEND] * 2 + [5]
    assert garbled.extension_parts(garbled.MAX_EXTEND) == [garbled.MAX_EXTEND]
    assert u_bytes(garbled.MAX_EXTEND) < DEFAULT_MAX_FRAME_BYTES // 2
    monkeypatch.setattr(garbled, "MAX_EXTEND", 300)
    parts, extend = [], OtExtReceiver.extend

    def counting(self, rho):
        parts.append(len(rho))
        return extend(self, rho)

    monkeypatch.setattr(OtExtReceiver, "extend", counting)

    def alice(ctx):
        evaluator = garbled.alice_setup(ctx, 700)
        return evaluator.pool_bits, evaluator.pool

    def bob(ctx):
        garbler = garbled.bob_setup(ctx, 700)
        return garbler.delta, garbler.pool

    result = simulate_alice_and_bob(alice, bob, keypair_512, seed=5, timeout=20)
    (rho, t), (delta, q) = result["alice"], result["bob"]
    assert parts == [300, 300, 100] and len(rho) == len(t) == len(q) == 700
    assert np.array_equal(t, q ^ ((np.uint64(0) - rho.astype(np.uint64))[:, None] & delta))
