"""protocols.match: private audio matching against the plaintext matcher, its transcripts,
what each party can compute from its view under chosen snippets, and its plugin, command
and benchmark (small insecure keys; the bundled FSDD collection and queries)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bench_support import run_bench
from scipy import stats
from transcript_harness import VIEW_P_MIN, assert_same_transcripts

from protocols import match as pm
from protocols.stages import bound as bd
from smc_hmm.crypto.packing import unpack_slots
from smc_hmm.data.match import (
    Collection,
    Quantisation,
    Spectrogram,
    candidates,
    load_bundled_collection,
    load_bundled_queries,
    load_match_manifest,
    match,
    raw_scores,
)
from smc_hmm.errors import ConfigError, InvalidInputError, PeerDisconnectedError, ProtocolError
from smc_hmm.runtime import run_protocol

pytestmark = pytest.mark.filterwarnings("ignore::smc_hmm.errors.InsecureKeyWarning")

RECORDINGS = 12


@pytest.fixture(scope="module")
def collection():
    return load_bundled_collection().head(RECORDINGS)


def _run(keypair, frames, collection, params=None, **kwargs):
    return run_protocol(
        pm.PROTOCOL,
        params or {},
        {"alice": ("alice", frames), "bob": ("bob", collection)},
        keys={"alice": keypair},
        min_key_bits=512,
        timeout=120,
        **kwargs,
    )


def _queries(collection, count=3):
    inside = [q for q in load_bundled_queries(inside=True) if q.recording < len(collection)]
    picks = [inside[i] for i in np.linspace(0, len(inside) - 1, count).astype(int)]
    return picks + load_bundled_queries("10", inside=False)[:1]


# -- secure == plaintext -------------------------------------------------------------------------


#: (mode, comparison): the garbled maximum (the default) in both modes, and the thesis's
#: DGK tournament kept as a named mode
MODES = [("exact", "garbled"), ("approx", "garbled"), ("exact", "dgk")]


@pytest.mark.parametrize("mode,comparison", MODES)
def test_alice_learns_the_plaintext_answer(keypair_1024, collection, mode, comparison):
    params = pm.MatchParams(mode=mode)
    for q in _queries(collection):
        result = _run(keypair_1024, q.frames, collection, {"mode": mode, "comparison": comparison})
        plain = pm.plain_match(q.frames, collection, params)
        out = result["alice"]
        assert (out["match"], out["recording"], out["offset_frames"]) == (
            plain.id,
            plain.recording,
            plain.offset,
        )
        assert out["candidates"] == len(candidates(collection.lengths, len(q.frames), params.pool))
        assert result["bob"] is None
        if q.inside and plain.matched:  # the bundled queries are found where they were cut
            assert plain.recording == q.recording and abs(plain.offset - q.offset) <= params.pool


@pytest.mark.parametrize("comparison", ["garbled", "dgk"])
def test_the_threshold_decides_no_match_strictly(keypair_512, collection, comparison):
    q = _queries(collection, 1)[0]
    always = _run(keypair_512, q.frames, collection, {"threshold": -1.0, "comparison": comparison})
    never = _run(keypair_512, q.frames, collection, {"threshold": 1.0, "comparison": comparison})
    always, never = always["alice"], never["alice"]
    assert always["match"] is not None and never["match"] is None
    # a threshold exactly at the best window's score: ties go to "no match"
    params = pm.MatchParams(threshold=-1.0)
    best = pm.plain_match(q.frames, collection, params)
    unit = params.quant.score_unit(len(q.frames), collection.bands)
    at = pm.MatchParams(threshold=best.value / unit)
    assert at.quant.threshold_units(at.threshold, len(q.frames), collection.bands) == best.value
    tie = _run(
        keypair_512,
        q.frames,
        collection,
        {"threshold": best.value / unit, "comparison": comparison},
    )["alice"]
    assert tie["match"] is None and pm.plain_match(q.frames, collection, at).matched is False


def test_a_snippet_longer_than_every_recording_is_no_match(keypair_512, collection):
    long = np.abs(np.random.default_rng(1).normal(size=(max(collection.lengths) + 1, 24)))
    out = _run(keypair_512, long, collection)["alice"]
    assert out == {
        "match": None,
        "recording": None,
        "offset_frames": None,
        "mode": "exact",
        "candidates": 0,
    }


def test_the_packing_puts_many_windows_in_one_ciphertext(keypair_1024, collection):
    q = _queries(collection, 1)[0]
    layout = pm.MatchLayout.build(pm.MatchParams(), 1024, len(q.frames), collection.lengths)
    assert layout.slots >= 8 and len(layout.blocks) < layout.total / 4
    result = _run(keypair_1024, q.frames, collection, record_views=True)
    masked = [p for peer, tag, p in result.views["alice"] if tag == "match.masked"]
    assert masked[0].shape == (len(layout.blocks),)  # Alice decrypts once per block
    ops = result.cost.parties["bob"]["phases"]["scores"]["ops"]
    mac_terms = bd.MAC_LIMBS * layout.length * layout.bands  # the MAC limbs over E(Q)
    assert ops["multiexp_terms"] == len(layout.blocks) * layout.rows * layout.bands + mac_terms


# -- the metadata rule ----------------------------------------------------------------------------


def _alike(collection, seed):
    """A collection with the same ids and lengths, other content."""
    rng = np.random.default_rng(seed)
    return Collection(
        collection.ids, [np.abs(rng.normal(size=f.shape)) + 0.01 for f in collection.frames]
    )


@pytest.mark.parametrize("mode,comparison", MODES[1:])  # the default: the conformance suite
def test_transcripts_do_not_depend_on_snippets_or_recordings(
    keypair_512, collection, mode, comparison
):
    rng = np.random.default_rng(5)
    length = 15
    cases = [
        (np.abs(rng.normal(size=(length, 24))), collection),
        (np.ones((length, 24)), _alike(collection, 6)),  # a constant snippet: all scores 0
    ]

    def run(case, wrap):
        params = {"mode": mode, "comparison": comparison}
        _run(keypair_512, case[0], case[1], params, wrap_transport=wrap)

    params = pm.MatchParams(mode=mode, comparison=comparison)
    layout = pm.MatchLayout.build(params, 512, length, collection.lengths)
    frames = assert_same_transcripts(run, cases, layout.declared_messages(), keys=[keypair_512])
    assert ("bob", "alice") in frames and ("alice", "bob") in frames


# -- attacks: what a party computes from its view, with chosen snippets -------------------------


def _alice_slots(keypair, frames, collection):
    """Alice's decrypted view of step 5: every masked slot she sees, with its layout."""
    result = _run(keypair, frames, collection, record_views=True)
    (masked,) = [p for _, tag, p in result.views["alice"] if tag == "match.masked"]
    layout = pm.MatchLayout.build(
        pm.MatchParams(), keypair[0].bits, len(frames), collection.lengths
    )
    values = []
    for v in masked.decrypt_residues(keypair[1]):
        values += unpack_slots([v], layout.slot_bits, layout.slots, layout.slots)
    return result, np.array(values, dtype=object), layout


def _unit_snippet(length: int, frame: int, band: int) -> np.ndarray:
    x = np.full((length, 24), 1.0)
    x[frame, band] = 2.0  # centred, it is a unit vector in one band (plus a constant)
    return x


def _read_spectrogram(keypair, snippet, collection):
    """The attack: Alice's slots against the raw scores they would be without masks."""
    result, slots, layout = _alice_slots(keypair, snippet, collection)
    quant = Quantisation()
    q = quant.query_ints(snippet)
    truth = []
    for r, o0, used in layout.blocks:
        raw = raw_scores(q, collection.ints(quant)[r])
        truth += [int(raw[o0 + k]) if k < used else None for k in range(layout.slots)]
    pairs = [(float(s), float(t)) for s, t in zip(slots, truth) if t is not None]
    seen, secret = np.array(pairs).T
    return result, seen, secret, layout


def test_a_deviating_alice_cannot_shift_a_window_score(keypair_512, collection, monkeypatch):
    """Her slots of step 5 are her circuit inputs, MAC-bound to the window scores Bob
    computed (garbled default): lowering the best window's slot ends the run with a
    typed error, no answer.  The control, the same circuit without the MAC check, names
    the second-best window -- what the earlier design, where she re-encrypted her slots
    for Bob, let her do: by bisection on the shift, the gap between the two best windows,
    one bit a session."""
    from smc_hmm.data.match import candidate_values

    q = _queries(collection, 1)[0]
    params = pm.MatchParams(threshold=-1.0)
    quant, bands = params.quant, collection.bands
    plain = [quant.threshold_units(-1.0, len(q.frames), bands)]
    plain += candidate_values(quant.query_ints(q.frames), collection.ints(quant), quant, 1)
    first, second = sorted(range(len(plain)), key=lambda i: (plain[i], -i))[::-1][:2]
    windows = candidates(collection.lengths, len(q.frames), 1)

    def index(out):
        return windows.index((out["recording"], out["offset_frames"])) + 1

    assert index(_run(keypair_512, q.frames, collection, {"threshold": -1.0})["alice"]) == first
    recording, offset = windows[first - 1]
    factor = quant.window_factors(collection.ints(quant)[recording], len(q.frames))[offset]
    drop = (int(plain[first]) - int(plain[second])) // int(factor) + 1
    real = bd.AliceShares.bits

    def lowered(self):  # her slot of the best window, just below the second
        y = list(self.y)
        y[first - 1] -= drop
        return real(bd.AliceShares(self.plan, y, self.z))

    monkeypatch.setattr(bd.AliceShares, "bits", lowered)
    with pytest.raises(ProtocolError, match="binding check"):
        _run(keypair_512, q.frames, collection, {"threshold": -1.0})
    monkeypatch.setattr(bd, "check_equal", lambda c, x, y: np.int64(1))  # the control
    pm.final_circuit.cache_clear()
    try:
        out = _run(keypair_512, q.frames, collection, {"threshold": -1.0})["alice"]
        assert index(out) == second != first
    finally:
        pm.final_circuit.cache_clear()


def test_a_unit_vector_snippet_does_not_read_bobs_spectrogram(keypair_512, collection, monkeypatch):
    """Q = e_(t, j) (up to centring) makes every raw score one of Bob's frame values,
    X[o + t, j]: without the masks Alice reads his spectrogram slot by slot (the control,
    masks set to zero, shows the attack works).  With them her slots do not correlate with
    those values, and the answer is the plaintext one."""
    snippet = _unit_snippet(12, 3, 5)
    with monkeypatch.context() as m:  # control: every mask the constant raw bound R
        m.setattr(
            pm, "slot_masks", lambda rng, lay: [[lay.raw_bound] * lay.slots] * len(lay.blocks)
        )
        _, seen, secret, layout = _read_spectrogram(keypair_512, snippet, collection)
        assert np.array_equal(seen - layout.raw_bound, secret)  # every value of Bob's, exactly
    result, seen, secret, layout = _read_spectrogram(keypair_512, snippet, collection)
    assert np.ptp(secret) > 0  # the attack would have had something to read
    assert abs(stats.spearmanr(seen, secret).statistic) < 0.25
    # the masked slots spread over the whole mask range, whatever the secret
    top = 1 << layout.slot_bits
    assert stats.kstest(seen / top, "uniform").pvalue > VIEW_P_MIN
    plain = pm.plain_match(snippet, collection, pm.MatchParams())
    assert (result["alice"]["match"], result["alice"]["offset_frames"]) == (plain.id, plain.offset)


def _deviating_alice(keypair, collection, send_and_read, length=12):
    """Bob against an Alice whose software opens the session as the protocol does (the
    catalogue, L, her key), then runs ``send_and_read(ctx, pk, sk, layout, msg)`` and
    leaves once she has read; its result."""
    from smc_hmm.runtime import simulate

    params, out = pm.MatchParams(), []

    def alice(ctx):
        pk, sk = ctx.keypair
        _, lengths = ctx.recv("bob", pm.CATALOGUE)
        ctx.send("bob", pm.FRAMES, length)
        ctx.send("bob", pm.KEY, pk)
        layout = pm.MatchLayout.build(params, pk.bits, length, lengths)
        out.append(send_and_read(ctx, pk, sk, layout, layout.messages()))

    with pytest.raises(PeerDisconnectedError):
        simulate(
            {"alice": alice, "bob": pm.bob},
            {"alice": (), "bob": (collection, params)},
            keys={"alice": keypair}, min_key_bits=512, timeout=60,
        )  # fmt: skip
    return out[0]


def _huge_entry(pk, shape, shift: int, declared: int):
    """E(2^shift) as entry (0, 0) of zeros, the ciphertexts declared within ``declared``."""
    from smc_hmm.crypto import CipherArray

    q = np.zeros(shape, dtype=object)
    q[0, 0] = 1 << shift
    return CipherArray(pk, CipherArray.encrypt_encoded(pk, q, 0).data, 0, declared)


def test_a_huge_snippet_entry_reads_nothing_of_bobs_frames(keypair_512, collection, monkeypatch):
    """Deviation: her software encrypts 2^L, L above every slot of a block, as snippet
    entry (0, 0) and declares it within bounds: block (r, o0) then carries
    2^L X_r[o0, 0] above its slots.  Every slot's mask spans its whole width and a top
    mask covers the bits above (:func:`protocols.match.packed_masks`): what she reads
    there is not Bob's frame value.  The control, the same masks without the top one,
    hands her X_r[o0, 0] of every block exactly."""
    from smc_hmm.crypto import CipherArray

    def send_and_read(ctx, pk, sk, layout, msg):
        shift, shape = layout.slots * layout.slot_bits + 8, (layout.rows, layout.bands)
        ctx.send("bob", msg["snippet"], _huge_entry(pk, shape, shift, msg["snippet"].body.bound))
        zero = np.zeros((12, layout.bands), dtype=object)
        ctx.send("bob", msg["query"], CipherArray.encrypt_encoded(pk, zero, 0))
        seen = ctx.recv("bob", msg["masked"]).decrypt_residues(sk)
        ints = collection.ints(pm.MatchParams().quant)
        truth = [int(ints[r][o0, 0]) for r, o0, _ in layout.blocks]
        return [(int(v) % int(pk.n)) >> shift for v in seen], truth

    seen, truth = _deviating_alice(keypair_512, collection, send_and_read)
    assert len(set(truth)) > 1 and sum(a == b for a, b in zip(seen, truth)) <= 1
    monkeypatch.setattr(pm, "top_mask", lambda n, width, rng: 0)
    seen, truth = _deviating_alice(keypair_512, collection, send_and_read)
    assert seen == truth


def test_a_huge_query_entry_reads_nothing_of_the_mac_weights(keypair_512, collection, monkeypatch):
    """Deviation: the same attack on E(Q), which Bob's MAC limbs read: entry (0, 0) of
    2^L, L above the MAC's slots, puts his weights V_l[0, 0] = limbs of
    sum_o alpha rho_o X[o, 0] (his key, which would let her forge the check) above the
    slots.  The top mask of the MAC's packing covers them; the control without it shows
    the limbs: the reading is 2^8 times a packing of three 21-bit limbs."""
    from protocols.stages import garbled as gc_stage
    from smc_hmm.crypto import CipherArray

    def send_and_read(ctx, pk, sk, layout, msg):
        snippet = np.zeros((layout.rows, layout.bands), dtype=object)
        ctx.send("bob", msg["snippet"], CipherArray.encrypt_encoded(pk, snippet, 0))
        width = layout.mac_bits + pm.MatchParams().sigma + 1  # the MAC's slots
        shift = bd.MAC_LIMBS * width + 8
        ctx.send(
            "bob", msg["query"], _huge_entry(pk, (12, layout.bands), shift, msg["query"].body.bound)
        )
        ctx.recv("bob", msg["masked"])
        (tag,) = ctx.recv("bob", msg["mac"]).decrypt_residues(sk)
        return (int(tag) % int(pk.n)) >> (shift - 8), width

    def limbs_in_clear(value, width):
        return value % 256 == 0 and all(
            (value >> (8 + width * i)) % (1 << width) < 1 << bd.MAC_LIMB_BITS
            for i in range(bd.MAC_LIMBS)
        )

    assert not limbs_in_clear(*_deviating_alice(keypair_512, collection, send_and_read))
    monkeypatch.setattr(gc_stage, "top_mask", lambda n, width, rng: 0)
    assert limbs_in_clear(*_deviating_alice(keypair_512, collection, send_and_read))


def test_a_query_that_disagrees_with_the_packed_snippet_is_refused(
    keypair_512, collection, monkeypatch
):
    """Deviation: her packed snippet (the window scores) and her E(Q) (what the MAC
    reads) differ in one entry: the check fails and the run ends without an answer --
    passing it would take the scores' difference, (Q' - Q).X, which is Bob's.  The
    control, the check removed, answers (on the packed snippet's scores)."""
    q = _queries(collection, 1)[0]
    real = pm.toeplitz

    def shifted(q_ints, layout):
        q_ints = np.array(q_ints, dtype=np.int64)
        q_ints[0, 0] += 1
        return real(q_ints, layout)

    monkeypatch.setattr(pm, "toeplitz", shifted)
    with pytest.raises(ProtocolError, match="binding check"):
        _run(keypair_512, q.frames, collection)
    monkeypatch.setattr(bd, "check_equal", lambda c, x, y: np.int64(1))  # the control
    pm.final_circuit.cache_clear()
    try:
        assert _run(keypair_512, q.frames, collection)["alice"]["candidates"] > 0
    finally:
        pm.final_circuit.cache_clear()


def test_repeated_frames_show_alice_uniform_masks_only(keypair_512, collection):
    """A snippet of one repeated frame centres to zero: every score is 0, the answer is "no
    match" (the threshold is positive), and every slot Alice decrypts is a bare mask --
    the same distribution against two different collections."""
    snippet = np.tile(np.linspace(0.1, 2.0, 24), (12, 1))
    views = []
    for coll in (collection, _alike(collection, 9)):
        result, slots, layout = _alice_slots(keypair_512, snippet, coll)
        assert result["alice"]["match"] is None
        assert all(0 <= int(v) < (1 << layout.slot_bits) for v in slots)
        views.append(np.array([float(v) for v in slots]))
    assert stats.ks_2samp(*views).pvalue > VIEW_P_MIN


def test_chosen_snippets_against_two_collections_give_alike_views(keypair_512, collection):
    """The same chosen snippet against two collections that share a catalogue: Alice's
    decrypted slots have the same distribution (masks of sigma bits over every value), so
    all she can tell them apart by is the answer."""
    snippet = _unit_snippet(14, 0, 0)
    a = _alice_slots(keypair_512, snippet, collection)[1]
    b = _alice_slots(keypair_512, snippet, _alike(collection, 11))[1]
    assert stats.ks_2samp([float(v) for v in a], [float(v) for v in b]).pvalue > VIEW_P_MIN


def test_bob_sees_ciphertexts_and_the_length_only(keypair_512, collection):
    """Bob's whole view: the snippet's length, Alice's keys and ciphertexts under them."""
    from smc_hmm.crypto import CipherArray, PublicKey

    result = _run(keypair_512, _unit_snippet(12, 2, 7), collection, record_views=True)
    plain = []
    for _, tag, payload in result.views["bob"]:
        parts = payload if isinstance(payload, list | tuple) else [payload]
        for part in parts:
            if not isinstance(part, CipherArray | PublicKey | bytes):
                plain.append((tag, part))
    assert plain and {tag for tag, _ in plain} <= {"match.frames", "cmp.dgk"}
    assert [p for tag, p in plain if tag == "match.frames"] == [12]


# -- parameters, inputs and the plugin ----------------------------------------------------------


def test_bad_parameters_and_inputs(keypair_512, collection):
    with pytest.raises(InvalidInputError):
        pm.MatchParams(mode="fuzzy")
    with pytest.raises(InvalidInputError):
        pm.MatchParams(mode="approx", stride=1)
    with pytest.raises(InvalidInputError):
        pm.MatchParams(threshold=1.5)
    with pytest.raises(ConfigError):
        pm.MatchParams.from_config({"modes": "exact"})
    assert pm.MatchParams.from_config({"mode": "approx", "stride": 3}).pool == 3
    assert pm.MatchParams().threshold_value() == load_match_manifest()["thresholds"]["1"]
    with pytest.raises(InvalidInputError, match="24"):
        _run(keypair_512, np.ones((12, 13)), collection)
    with pytest.raises(ProtocolError):
        pm.check_catalogue(["a"], [0])
    with pytest.raises(ProtocolError):
        pm.check_catalogue(["a", "b"], [3])
    with pytest.raises(InvalidInputError, match="comparison"):
        pm.MatchParams(comparison="yao")


def test_a_text_file_as_collection_is_refused_in_words(tmp_path):
    """A text file given as Bob's collection: numpy's answer advised loading it with
    allow_pickle, an invitation to unpickle; the refusal now names what is expected."""
    notes = tmp_path / "notes.txt"
    notes.write_text("not a collection")
    with pytest.raises(ConfigError, match="an .npz archive written by Collection.save") as e:
        Collection.load(notes)
    assert "pickle" not in str(e.value)


def test_randomizers_are_planned_exactly(keypair_512, collection):
    """The offline plan covers the run: no pool runs dry, none is left over."""
    from smc_hmm.runtime.offline import offline_phase

    q = _queries(collection, 1)[0]
    inputs = {"alice": q.frames, "bob": collection}
    pk = keypair_512[0]
    base = pk.randomizer
    phase = offline_phase("match", {"mode": "approx"}, inputs, pk)
    pk.use_randomizer(phase.alice)
    try:
        _run(
            keypair_512, q.frames, collection, {"mode": "approx"}, randomizers=phase.randomizers(pk)
        )
    finally:
        pk.use_randomizer(base)
    assert phase.misses == 0 and len(phase.alice) == 0 and len(phase.bob) == 0


_wavs = pm.example_wavs  # a folder of WAV recordings of gliding, pulsed tones


def test_a_folder_of_wav_files_is_a_collection(tmp_path):
    folder = _wavs(tmp_path / "wavs")
    coll = Collection.load(folder)
    assert coll.ids == ["rec0", "rec1", "rec2", "rec3"] and coll.bands == 24
    coll.save(tmp_path / "c.npz")
    again = Collection.load(tmp_path / "c.npz")
    assert again.ids == coll.ids and all(
        np.allclose(a, b, rtol=1e-6) for a, b in zip(again.frames, coll.frames)
    )
    snippet = Spectrogram().from_wav(folder / "rec2.wav", start=0.2, seconds=0.3)
    found = match(snippet, coll, threshold=0.5)
    assert found.id == "rec2" and found.offset == 10  # 0.2 s at 20 ms a frame
    with pytest.raises(ConfigError):
        Collection.load(tmp_path / "nothing-here")


@pytest.mark.slow
def test_a_serving_bob_matches_clients(tmp_path, capsys):
    """smc-hmm serve with protocol = "match": a client session, then the command as a
    client (which checks the served mode before sending anything)."""
    from scipy.io import wavfile
    from serve_harness import session, write_served_config

    from smc_hmm.cli import main
    from smc_hmm.runtime import load_config
    from smc_hmm.runtime.serve import Server

    folder = _wavs(tmp_path / "collection")
    path = write_served_config(
        tmp_path / "parties.toml",
        "match",
        {"collection": "collection"},
        {"threshold": 0.5},
        timeout=60,
    )
    rate, y = wavfile.read(folder / "rec2.wav")
    wavfile.write(tmp_path / "snippet.wav", rate, y[1600:4800])
    snippet = Spectrogram().from_wav(tmp_path / "snippet.wav")
    with Server(load_config(path), "bob", port=0) as server:
        out = session("match", server.address, tmp_path / "certs", snippet, "alice", timeout=60)
        assert (out["output"]["match"], out["output"]["offset_frames"]) == ("rec2", 10)
        host, port = server.address
        certs = str(tmp_path / "certs")
        argv = ["match", "--audio", str(tmp_path / "snippet.wav"), "--collection", str(folder),
                "--threshold", "0.5", "--server", f"{host}:{port}", "--certs", certs,
                "--name", "carol", "--key-bits", "512", "--insecure"]  # fmt: skip
        assert main([*argv, "--json", "-"]) == 0
        captured = capsys.readouterr()
        report = json.loads(captured.out)  # --json -: the report alone
        assert "secure matching: argmax (phase 4 of 4)" in captured.err  # progress
        assert report["secure"]["match"] == report["plaintext_reference"]["match"] == "rec2"
        assert main([*argv[:-2], "--mode", "approx", "--key-bits", "512", "--insecure"]) == 2


def test_the_command_prints_both_answers(tmp_path, capsys):
    from smc_hmm.cli import main

    folder = _wavs(tmp_path / "wavs")
    path = tmp_path / "out.json"
    code = main(
        ["match", "--audio", str(folder / "rec3.wav"), "--start", "0.1", "--seconds", "0.4",
         "--collection", str(folder), "--threshold", "0.5", "--key-bits", "512", "--insecure",
         "--workers", "1", "--json", str(path)]
    )  # fmt: skip
    assert code == 0
    report = json.loads(path.read_text())
    assert (
        report["secure"]
        == report["plaintext"]
        == {
            "match": "rec3",
            "offset_frames": 5,
            "offset_seconds": 0.1,
        }
    )
    assert report["agree"] and "parties" in report["cost"]
    assert main(["match", "--audio", str(folder / "rec3.wav"), "--mode", "approx",
                 "--stride", "1", "--key-bits", "512", "--insecure"]) == 2  # fmt: skip
    assert main(["match", "--audio", str(folder / "rec3.wav"), "--stride", "3",
                 "--key-bits", "512", "--insecure"]) == 2  # fmt: skip
    assert "--stride is for --mode approx" in capsys.readouterr().err


def test_bench_match_smoke(tmp_path):
    from smc_hmm.bench import match as bench

    _, data = run_bench(
        bench,
        [
            "--key-bits",
            "512",
            "--insecure",
            "--workers",
            "1",
            "--recordings",
            "8",
            "--queries",
            "1",
            "--growth",
            "4,8",
            "--sweep",
            "2",
            "--accuracy-queries",
            "4",
        ],
        tmp_path / "match.json",
    )  # fmt: skip  (the exit status: the 2048-bit targets are not this toy run's)
    assert data["benchmark"] == "match" and set(data["accuracy"]) == {"exact", "approx"}
    assert all(r["equal"] for m in data["speed"]["runs"].values() for r in m)
    assert all(r["equal"] for m in data["sweep"].values() for r in m)
    assert [p["recordings"] for p in data["growth"]["points"]] == [4, 8]
    assert data["extrapolation"]["recordings"] == 10_000
    rows = {r["name"]: r for r in data["rows"]}
    assert rows["sweep, exact: secure answers that differ from plaintext"]["ours"] == 0


def test_bench_match_exits_1_on_a_missed_target(tmp_path, monkeypatch):
    from smc_hmm.bench import match as bench

    # no growth is that sublinear, whatever the timing noise of tiny collections
    monkeypatch.setattr(bench, "SLOPE_LIMIT", -1e9)
    code, data = run_bench(
        bench,
        ["--key-bits", "512", "--insecure", "--workers", "1", "--skip-accuracy",
         "--skip-speed", "--growth", "4,8"],
        tmp_path / "missed.json",
    )  # fmt: skip
    assert code == 1
    rows = {r["name"]: r for r in data["rows"]}
    assert rows["growth: log-log slope of seconds vs recordings"]["limit"] == -1e9


def test_bench_match_on_a_folder_collection(tmp_path):
    """``--collection DIR``: Bob's collection is a folder of WAV files and the timed
    queries are noisy excerpts of its own recordings, answered as plaintext answers them;
    the parts that need the bundled queries are refused with it, in one line."""
    from smc_hmm.bench import match as bench

    folder = _wavs(tmp_path / "wavs", count=5)
    args = ["--key-bits", "512", "--insecure", "--workers", "1", "--collection", str(folder),
            "--queries", "2", "--growth", "", "--modes", "exact"]  # fmt: skip
    _, data = run_bench(bench, [*args, "--skip-accuracy"], tmp_path / "folder.json")
    runs = data["speed"]["runs"]["exact"]
    assert len(runs) == 2 and all(r["equal"] for r in runs)
    assert data["params"]["recordings"] == 5
    with pytest.raises(InvalidInputError, match="--skip-accuracy"):
        run_bench(bench, args, tmp_path / "refused.json")


def test_a_large_collection_runs_in_circuits_of_bounded_size():
    """The garbled maximum runs in circuits of at most CHUNK candidates, each carrying the
    best so far: a catalogue of 56,000 windows needs 219 of them, every one's tables a
    few MiB, far below a frame (256 MiB), and they share one shape but the last."""
    from smc_hmm.gc.garble import TABLE_BYTES
    from smc_hmm.wire import DEFAULT_MAX_FRAME_BYTES

    layout = pm.MatchLayout.build(pm.MatchParams(), 2048, 13, [40] * 2000)
    assert len(layout.chunks) == 219
    shapes = {layout.chunk_shape(i) for i in range(len(layout.chunks))}
    assert len(shapes) == 3  # the first (the threshold's), the middle ones, the last
    largest = max(pm.chunk_circuit(s).and_gates for s in shapes) * TABLE_BYTES
    assert largest < 8 << 20 < DEFAULT_MAX_FRAME_BYTES
