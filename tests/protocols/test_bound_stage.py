"""protocols.stages.bound: Alice's circuit inputs are bound to the values the protocol gave
her.  Each deviation of a client who changes her own software is replayed against the
default (it must be rejected: no output for her, a rejected claim for Bob) and against a
mode without the binding as the control (where it must succeed); the MAC's algebra and its
soundness error are checked on their own; and a server who deviates learns at most whether
Alice aborted."""

from __future__ import annotations

import numpy as np
import pytest

from protocols import speaker as spk
from protocols.stages import bound as bd
from smc_hmm.crypto.rng import Rng
from smc_hmm.errors import GarbledCircuitError, ProtocolError
from smc_hmm.gc import mac
from smc_hmm.gc.garble import new_delta
from smc_hmm.gc.hashing import random_blocks
from smc_hmm.hmm import GaussianHMM
from smc_hmm.runtime import run_protocol

# -- the MAC: shares of alpha x from labels, and what a shift costs ------------------------


def _labels(n, rng):
    delta = new_delta(rng)
    zero = random_blocks(rng, n)
    bits = np.frombuffer(rng.randbits(8 * n).to_bytes(n, "little"), np.uint8) & 1
    held = zero ^ ((np.uint64(0) - bits.astype(np.uint64))[:, None] & delta)
    return delta, zero, bits, held


def test_label_macs_share_alpha_times_each_bit_and_each_value():
    rng = Rng()
    delta, zero, bits, held = _labels(400, rng)
    alpha = 1 + rng.randbelow(mac.PRIME - 1)
    b, corrections = mac.garbler_mac(zero, delta, alpha, 7)
    a = mac.evaluator_mac(held, bits, corrections, 7)
    assert all((int(x) + int(y)) % mac.PRIME == alpha * int(v) % mac.PRIME
               for x, y, v in zip(a, b, bits))  # fmt: skip
    values = [sum(int(bits[i * 40 + j]) << j for j in range(40)) for i in range(10)]
    va = mac.weighted_sum(a.reshape(10, 40))
    vb = mac.weighted_sum(b.reshape(10, 40))
    assert [(int(x) + int(y)) % mac.PRIME for x, y in zip(va, vb)] == [
        alpha * v % mac.PRIME for v in values
    ]


def test_a_claimed_other_bit_needs_alpha():
    """Her share for the bit she does not hold: H'(T) - x' c with x' != x.  Without the
    other label she computes it only from the correction, which is H'(W1) - H'(W0) - alpha:
    the shares she can make for the flipped bits never add up to alpha x' (1,000 trials)."""
    rng = Rng()
    delta, zero, bits, held = _labels(1000, rng)
    alpha = 1 + rng.randbelow(mac.PRIME - 1)
    b, corrections = mac.garbler_mac(zero, delta, alpha, 3)
    forged = mac.evaluator_mac(held, 1 - bits, corrections, 3)
    ok = [(int(x) + int(y)) % mac.PRIME == alpha * (1 - int(v)) % mac.PRIME
          for x, y, v in zip(forged, b, bits)]  # fmt: skip
    assert not any(ok)
    assert pytest.approx(3 / (2**61 - 1)) == bd.SOUNDNESS


# -- speaker verification: the deviations of the review, replayed --------------------------


def _speaker_models(rng, dims=3):
    """Two speakers and a UBM: diagonal GMMs of two components (HMMs whose rows equal the
    weights)."""
    out = []
    for centre in (0.0, 3.0, 1.5):
        w = np.array([0.6, 0.4])
        means = rng.normal(centre, 0.5, size=(2, dims))
        out.append(GaussianHMM(w, np.tile(w, (2, 1)), means, np.full((2, dims), 0.8), "diag"))
    return out, ["s0", "s1", "ubm"]


def _verify(keypair, frames, claim, models, labels, mode="verify", scoring="max", threshold=0.0):
    params = {"mode": mode, "scoring": scoring, "threshold": threshold}
    return run_protocol(
        spk.PROTOCOL,
        params,
        {"alice": ("alice", (frames, claim)), "bob": ("bob", (models, labels))},
        keys={"alice": keypair},
        min_key_bits=512,
        timeout=120,
    )


@pytest.fixture
def impostor():
    """An utterance of speaker s0 claiming s1: an honest run rejects it."""
    rng = np.random.default_rng(3)
    models, labels = _speaker_models(rng)
    frames, _ = models[0].sample(6, rng)
    return models, labels, frames


def test_an_honest_impostor_is_rejected_and_the_owner_accepted(keypair_1024, impostor):
    models, labels, frames = impostor
    assert _verify(keypair_1024, frames, "s1", models, labels)["bob"]["accept"] is False
    assert _verify(keypair_1024, frames, "s0", models, labels)["bob"]["accept"] is True


def test_shifted_emission_shares_are_rejected(keypair_1024, impostor, monkeypatch):
    """Deviation: she adds +50 nats' worth to her shares of the claim's emissions (what
    "+50 nats on her own score share" and "smaller LOGSUM values for the UBM" did in the
    thesis's mode): the MAC check fails inside the circuit and the bit Bob decodes is 0."""
    models, labels, frames = impostor
    original = bd.AliceBound.frame_bits

    def shifted(self, t):
        y = self.y.copy()
        y[t] = [int(v) + (50 << 40) for v in y[t]]  # every row of every frame
        return self.plan.frame_bits_of(y[t], self.phi[t])

    monkeypatch.setattr(bd.AliceBound, "frame_bits", shifted)
    assert _verify(keypair_1024, frames, "s1", models, labels)["bob"]["accept"] is False
    monkeypatch.setattr(bd.AliceBound, "frame_bits", original)
    # the control: the thesis's LOGSUM mode, her share of the claim's score +50 nats/frame
    real = spk._alice_logsums

    def inflate(ctx, spec, y, msg, peer):
        shares = real(ctx, spec, y, msg, peer)
        shares[0] += (50 * spec.length) << spec.f  # the claim runs first in verify
        return shares

    monkeypatch.setattr(spk, "_alice_logsums", inflate)
    control = _verify(keypair_1024, frames, "s1", models, labels, scoring="logsum")
    assert control["bob"]["accept"] is True


def test_a_fake_square_is_rejected_and_accepted_by_the_thesis_mode(keypair_1024, monkeypatch):
    """Deviation: x^2 ciphertexts that disagree with x.  A claim whose components are
    narrow against a wide UBM: honest frames far from the claim are rejected, but with
    x^2 = 0 the narrow model loses its quadratic penalty and the ratio tips.  The default
    checks x^2 = x x in the circuit and rejects; the thesis's LOGSUM mode (the control)
    accepts the impostor."""
    from protocols.stages import emissions

    w = np.array([0.5, 0.5])
    models = [
        GaussianHMM(w, np.tile(w, (2, 1)), np.full((2, 3), m), np.full((2, 3), v), "diag")
        for m, v in ((0.0, 1.0), (3.0, 0.3), (1.5, 3.0))
    ]
    labels = ["s0", "s1", "ubm"]
    frames = np.full((4, 3), 10.0)
    assert _verify(keypair_1024, frames, "s1", models, labels)["bob"]["accept"] is False
    original = bd.encode_products

    def fake(x, diagonal, scale):
        out = original(x, diagonal, scale)
        out[:, x.shape[1] :] = 0  # "x^2" = 0
        return out

    monkeypatch.setattr(bd, "encode_products", fake)
    assert _verify(keypair_1024, frames, "s1", models, labels)["bob"]["accept"] is False
    packer = emissions.alice_pack

    def fake_pack(pk, encoded, layout, scale, bound):
        encoded = np.asarray(encoded, dtype=object).copy()
        encoded[:, encoded.shape[1] // 2 :] = 0
        return packer(pk, encoded, layout, scale, bound)

    monkeypatch.setattr(emissions, "alice_pack", fake_pack)
    control = _verify(keypair_1024, frames, "s1", models, labels, scoring="logsum")
    assert control["bob"]["accept"] is True


def test_a_forged_check_value_is_rejected(keypair_1024, impostor, monkeypatch):
    """Deviation: she enters a D_A of her choice (she does not know alpha): rejected."""
    models, labels, frames = impostor
    monkeypatch.setattr(bd.AliceBound, "check_value", lambda self: 12345)
    assert _verify(keypair_1024, frames, "s0", models, labels)["bob"]["accept"] is False


def test_a_forged_output_label_is_refused(keypair_1024, impostor, monkeypatch):
    """Deviation: "opening the bit + 1" becomes returning a label other than the one she
    holds for Bob's output wire: it is neither of its two labels, and Bob's run raises."""
    from smc_hmm.gc import garble

    models, labels, frames = impostor
    real = garble.garbler_output_labels

    def forged(circuit, labels_):
        out = real(circuit, labels_).copy()
        out[:, 0] ^= np.uint64(2)
        return out

    monkeypatch.setattr(garble, "garbler_output_labels", forged)
    monkeypatch.setattr("protocols.stages.garbled.garbler_output_labels", forged)
    with pytest.raises(GarbledCircuitError):
        _verify(keypair_1024, frames, "s1", models, labels)


def test_anonymous_claims_are_index_bits_and_past_the_speakers_refused(
    keypair_1024, impostor, monkeypatch
):
    """Anonymous mode: her claim is index bits selecting one speaker in the circuit (no
    one-hot vector to weight or fill with ones); an index past the speakers selects the
    UBM against itself and is refused."""
    models, labels, frames = impostor
    out = _verify(keypair_1024, frames, "s0", models, labels, mode="anonymous")
    assert out["bob"] == {"accept": True, "mode": "anonymous"}
    from protocols.stages import mixture

    real = mixture.alice_mixture
    monkeypatch.setattr(
        mixture,
        "alice_mixture",
        lambda ctx, ev, lay, binding, claim=None, prefix="mix": real(ctx, ev, lay, binding, 3),
    )
    out = _verify(keypair_1024, frames, "s0", models, labels, mode="anonymous")
    assert out["bob"]["accept"] is False


# -- a server who deviates: one bit, whether Alice aborts -----------------------------------


def test_corrupted_corrections_make_alice_abort_at_the_end_only(keypair_1024, monkeypatch):
    """Bob sends a correction that is off for one wire (the selective-failure probe of the
    binding: the check now depends on that one input bit of hers).  Alice's output is then
    refused; she raises only after her last message, so that what Bob sees is the same
    messages in the same order, and at most the one bit of whether she aborted."""
    rng = np.random.default_rng(9)
    from smc_hmm.hmm import viterbi as plain

    models = [
        GaussianHMM([0.7, 0.3], [[0.8, 0.2], [0.3, 0.7]], rng.normal(3 * k, 1, (2, 3)),
                    np.ones((2, 3)), "diag")
        for k in range(2)
    ]  # fmt: skip
    frames, _ = models[1].sample(5, rng)
    real = mac.garbler_mac

    def probe(zero, delta, alpha, tweak):
        b, c = real(zero, delta, alpha, tweak)
        c = c.copy()
        c[17] = (int(c[17]) + 1) % mac.PRIME  # matters iff her bit 17 is 1
        return b, c

    def run():
        return run_protocol(
            "keyword",
            {},
            {"alice": ("alice", frames), "bob": ("bob", (models, ["a", "b"]))},
            keys={"alice": keypair_1024},
            min_key_bits=512,
            timeout=120,
            record_views=True,
        )

    honest = run()
    assert honest["alice"]["index"] == int(np.argmax([plain(m, frames)[1] for m in models]))
    monkeypatch.setattr(mac, "garbler_mac", probe)
    monkeypatch.setattr(bd.mac, "garbler_mac", probe)
    bits = bd.AliceBound.all_bits
    seen = {}

    def keep(self):
        seen["bit"] = int(bits(self)[17])
        return bits(self)

    monkeypatch.setattr(bd.AliceBound, "all_bits", keep)
    try:
        probed = run()
        aborted = False
        received = [t for _, t, _ in probed.views["bob"]]
    except ProtocolError as e:
        aborted = True
        assert "binding check failed" in str(e)
    assert aborted == bool(seen["bit"])  # the one bit Bob's probe can learn
    if not aborted:
        assert received == [t for _, t, _ in honest.views["bob"]]


# -- a client who encrypts what no honest frame is -------------------------------------------


def _forging_pack(real, high_bits):
    """alice_pack with 2^L added to input 0 of group 0, L = ``high_bits(layout)``: a
    "feature" far above every slot, claimed under the declared bound."""
    from smc_hmm.crypto import CipherArray

    def pack(pk, encoded, layout, scale, bound):
        honest = real(pk, encoded, layout, scale, bound)
        extra = np.zeros(honest.shape, dtype=object)
        extra[0, 0] = 1 << high_bits(layout)
        forged = CipherArray.encrypt_encoded(pk, extra, scale)
        return CipherArray(pk, (honest + forged).data, scale, bound)

    return pack


def _read_high(ciphertexts, keypair, shift):
    """What she reads above bit ``shift`` of each row of group 0 (rounded, signed)."""
    n = int(keypair[0].n)
    out = []
    for v in ciphertexts.decrypt_ints(keypair[1])[0]:
        v = int(v) % n
        v = v - n if v > n // 2 else v
        out.append((v + (1 << (shift - 1))) >> shift)
    return out


def test_a_huge_feature_reads_nothing_of_bobs_weights_and_the_thesis_mode_leaks_them(
    keypair_1024, impostor, monkeypatch
):
    """Deviation: she encrypts 2^L in one packed input, L above every slot, so that Bob's
    weight of that input would land, times 2^L, where no slot's mask covers it.  In the
    default every packed plaintext she decrypts is uniform on Z_n (the slots' masks over
    their whole width and the top mask): what she reads there is not his weights, the
    run is rejected, and the decision is refused.  The control, the thesis's LOGSUM mode,
    hands her every weight of that input exactly, in one session."""
    from protocols.stages import emissions

    models, labels, frames = impostor
    active = [models[labels.index("s1")], models[labels.index("ubm")]]
    params = {"mode": "verify", "scoring": "max", "threshold": 0.0}
    spec = spk.SpeakerSpec(spk.SpeakerParams(**params), 3, (2, 2), len(frames), 1024, labels)
    weights, _ = spk.emission_program(active, spec, bound=True)

    def above(layout):  # above the slots of group 0's frames
        return len(layout.groups[0]) * layout.plan.slot_bits + 8

    shift = above(spec.bound_plan.layout)
    monkeypatch.setattr(bd, "alice_pack", _forging_pack(bd.alice_pack, above))
    run = run_protocol(
        spk.PROTOCOL, params,
        {"alice": ("alice", (frames, "s1")), "bob": ("bob", (models, labels))},
        keys={"alice": keypair_1024}, min_key_bits=512, timeout=120, record_views=True,
    )  # fmt: skip
    (emit,) = [p for _, t, p in run.views["alice"] if t == "bd.values"]
    read = _read_high(emit, keypair_1024, shift)[: spec.bound_plan.rows]
    assert run["bob"]["accept"] is False
    # uniform over the values above the slots: none near its weight
    assert all(abs(r - int(w)) > 256 for r, w in zip(read, weights[:, 0]))
    # the control: the thesis's LOGSUM mode, the same forged input
    monkeypatch.undo()
    thesis = spk.SpeakerSpec(
        spk.SpeakerParams(mode="verify", scoring="logsum"), 3, (2, 2), len(frames), 1024, labels
    )
    weights, _ = spk.emission_program(active, thesis)
    monkeypatch.setattr(emissions, "alice_pack", _forging_pack(emissions.alice_pack, above))
    run = run_protocol(
        spk.PROTOCOL, {**params, "scoring": "logsum"},
        {"alice": ("alice", (frames, "s1")), "bob": ("bob", (models, labels))},
        keys={"alice": keypair_1024}, min_key_bits=512, timeout=120, record_views=True,
    )  # fmt: skip
    (emit,) = [p for _, t, p in run.views["alice"] if t == "spk.emit"]
    read = _read_high(emit, keypair_1024, above(thesis.emissions))
    assert read == [int(w) for w in weights[:, 0]]


def _max_score(model, frames) -> float:
    """The default's score of a diagonal GMM (an HMM whose rows are the weights): per frame
    its best component's log(w N(x)), summed."""
    w, mu, var = model.transmat[0], model.means, model.covars
    logs = np.log(w) - 0.5 * (
        np.log(2 * np.pi * var).sum(axis=1) + (((frames[:, None] - mu) ** 2) / var).sum(axis=2)
    )
    return float(logs.max(axis=1).sum())


def test_shares_shifted_by_a_multiple_of_p_are_rejected(keypair_1024, impostor, monkeypatch):
    """Deviation: she adds k p (p = 2^61 - 1, the MAC field) to her shares of the UBM's
    values and subtracts it from the claim's, |k| as large as her share's range takes
    (about 2^(B-62)): the mod-p check cannot see it, and the circuit would read the UBM's
    log-densities lower and the claim's higher by up to 2^(B-62) units.  The threshold
    sits half a nat a frame above the impostor's ratio, so that a nat's shift gets him
    accepted.  The default reconstructs each value over its whole slot and rejects one
    that leaves its range (``bd.in_range``); the control, the same circuit without that
    check, accepts."""
    models, labels, frames = impostor
    claim, ubm = models[labels.index("s1")], models[labels.index("ubm")]
    threshold = (_max_score(claim, frames) - _max_score(ubm, frames)) / len(frames) + 0.5

    def shifted(self, t):
        top, p = 1 << (self.plan.share_bits - 1), mac.PRIME  # a slot's signed range
        y = [int(v) + ((top - 1 - int(v)) // p) * p if j >= 2  # the UBM's rows: lower
             else int(v) - ((int(v) + top) // p) * p  # the claim's: higher
             for j, v in enumerate(self.y[t])]  # fmt: skip
        return self.plan.frame_bits_of(y, self.phi[t])

    def run():
        return _verify(keypair_1024, frames, "s1", models, labels, threshold=threshold)

    assert run()["bob"]["accept"] is False  # honest: rejected
    monkeypatch.setattr(bd.AliceBound, "frame_bits", shifted)
    assert run()["bob"]["accept"] is False
    from protocols.stages import mixture

    circuits = (mixture.inputs_circuit, mixture.final_circuit)
    for built in circuits:  # the circuits are built once per layout
        built.cache_clear()
    monkeypatch.setattr(bd, "in_range", lambda c, v, bits: np.ones(v.shape[:-1], np.int64))
    assert run()["bob"]["accept"] is True
    monkeypatch.undo()
    for built in circuits:
        built.cache_clear()
