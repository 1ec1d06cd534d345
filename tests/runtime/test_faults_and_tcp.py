"""Secure sum over TCP with mutual TLS (threads in one process) and fault injection at
every message, in-process and over TCP."""

import threading
import time

import numpy as np
import pytest

from protocols import secure_sum as ss
from smc_hmm.certs import make_certificates
from smc_hmm.errors import AuthenticationError, SmcHmmError, TransportError
from smc_hmm.runtime import simulate
from smc_hmm.transport.faults import FAULT_MODES, FaultyTransport
from smc_hmm.transport.tcp import TcpNetwork, TlsConfig

PARAMS = ss.Params(contributors=("bob",), length=4, scale=16, max_abs=1000)
INPUTS = {
    "alice": np.array([1.5, -2.0, 3.25, 0.0]),
    "bob": np.array([10.0, 20.0, 30.0, 40.0]),
    "trent": np.array([0.5, 0.25, -0.125, 100.0]),
}
ROLES = {"alice": ss.alice, "trent": ss.trent, "bob": ss.contributor}
ARGS = {
    "alice": (INPUTS["alice"], PARAMS),
    "trent": (INPUTS["trent"], PARAMS),
    "bob": (INPUTS["bob"], PARAMS),
}
#: every message of the run as (sender, index among the sender's sends), in protocol order
MESSAGES = [("alice", 0), ("alice", 1), ("bob", 0), ("trent", 0)]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"), ["alice", "bob", "trent"])


def _tcp(certs):
    def factory(names):
        return TcpNetwork(names, tls={n: certs.tls_config(n) for n in names}, connect_timeout=10)

    return factory


def _run(keypair, network=None, **kwargs):
    return simulate(
        ROLES, ARGS, keys={"alice": keypair}, network=network, **kwargs, min_key_bits=512
    )


def _comparable(report):
    """Everything but timings."""
    return {
        name: {k: v for k, v in p.items() if k not in ("time", "phases")}
        | {"phase_ops": {ph: s["ops"] for ph, s in p["phases"].items()}}
        for name, p in report.parties.items()
    }


def test_secure_sum_over_mutual_tls_matches_in_process_exactly(keypair_512, certs):
    before = set(threading.enumerate())
    local = _run(keypair_512)
    tcp = _run(keypair_512, network=_tcp(certs), meta={"mode": "tcp"})
    expected = sum(INPUTS.values())
    assert np.allclose(local["alice"], expected, atol=1e-4)
    assert np.array_equal(tcp["alice"], local["alice"])
    # messages, encoded bytes per peer and direction, rounds and operation counts agree
    assert _comparable(tcp.cost) == _comparable(local.cost)
    assert tcp.cost.rounds == 3 and tcp.cost.bytes_total == local.cost.bytes_total
    assert set(threading.enumerate()) == before


def test_a_party_with_a_certificate_for_another_name_is_refused(certs, tmp_path):
    other = make_certificates(tmp_path, ["mallory"])
    tls = {n: certs.tls_config(n) for n in ("alice", "bob")}
    # bob presents a valid certificate from a different CA
    tls["bob"] = TlsConfig(other.ca_cert, other.certs["mallory"], other.keys["mallory"])
    before = set(threading.enumerate())
    with pytest.raises((AuthenticationError, TransportError)):
        TcpNetwork(["alice", "bob"], tls=tls, connect_timeout=2)
    time.sleep(0.1)
    assert set(threading.enumerate()) == before


@pytest.mark.parametrize("mode", FAULT_MODES)
@pytest.mark.parametrize("message", range(len(MESSAGES)))
@pytest.mark.parametrize("transport", ["local", "tcp"])
def test_fault_at_every_message_fails_every_party_cleanly(
    keypair_512, certs, transport, message, mode
):
    party, index = MESSAGES[message]
    faults = []

    def wrap(name, inner):
        if name != party:
            return inner
        faulty = FaultyTransport(inner, fail_at=index, mode=mode)
        faults.append(faulty)
        return faulty

    timeout = 0.5
    before = set(threading.enumerate())
    t0 = time.monotonic()
    result = None
    with pytest.raises(SmcHmmError) as info:
        result = _run(
            keypair_512,
            network=_tcp(certs) if transport == "tcp" else None,
            wrap_transport=wrap,
            timeout=timeout,
        )
    elapsed = time.monotonic() - t0
    assert result is None
    assert faults[0].triggered
    assert isinstance(info.value, TransportError), repr(info.value)
    # detection takes at most one receive timeout (drop / stall), plus teardown
    assert elapsed < timeout + 3.0, elapsed
    time.sleep(0.05)
    assert set(threading.enumerate()) == before


def test_a_run_without_faults_has_exactly_these_messages(keypair_512):
    sent = {}

    def wrap(name, inner):
        counter = FaultyTransport(inner, fail_at=10**6, mode="drop")
        sent[name] = counter
        return counter

    _run(keypair_512, wrap_transport=wrap)
    assert {n: t.sent for n, t in sent.items()} == {"alice": 2, "bob": 1, "trent": 1}
    assert len(MESSAGES) == sum(t.sent for t in sent.values())
