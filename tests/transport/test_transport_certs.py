"""make_certificates: a CA and per-party certificates usable for mutual TLS."""

from __future__ import annotations

import ipaddress
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from smc_hmm.certs import make_certificates
from smc_hmm.errors import ConfigError


def test_files_names_and_permissions(tmp_path):
    out = make_certificates(tmp_path / "pki", "alice,bob,trent", days=30)
    assert out.ca_cert == tmp_path / "pki" / "ca.pem"
    assert sorted(p.name for p in (tmp_path / "pki").iterdir()) == [
        "alice.key",
        "alice.pem",
        "bob.key",
        "bob.pem",
        "ca.pem",
        "trent.key",
        "trent.pem",
    ]
    ca = x509.load_pem_x509_certificate(out.ca_cert.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for party in ("alice", "bob", "trent"):
        assert stat.S_IMODE(out.keys[party].stat().st_mode) == 0o600
        cert = x509.load_pem_x509_certificate(out.certs[party].read_bytes())
        cert.verify_directly_issued_by(ca)
        cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        assert cn == party
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert san.get_values_for_type(x509.DNSName) == [party, "localhost"]
        assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        assert 29 < lifetime.days <= 31
        key = load_pem_private_key(out.keys[party].read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
        assert key.public_key() == cert.public_key()


def test_rerun_overwrites_with_fresh_keys(tmp_path):
    first = make_certificates(tmp_path, ["alice", "bob"]).keys["alice"].read_bytes()
    again = make_certificates(tmp_path, ["alice", "bob"])
    assert again.keys["alice"].read_bytes() != first
    assert stat.S_IMODE(again.keys["alice"].stat().st_mode) == 0o600


def test_tls_config_helper(tmp_path):
    out = make_certificates(tmp_path, ["alice", "bob"])
    cfg = out.tls_config("bob")
    assert (cfg.ca_cert, cfg.cert, cfg.key) == (out.ca_cert, out.certs["bob"], out.keys["bob"])
    assert cfg.server_context() is not None and cfg.client_context() is not None


@pytest.mark.parametrize(
    "parties",
    [[], ["alice", "alice"], ["Alice"], ["ca"], ["a b"], ["../evil"], ["-x"], [""], ["x" * 64]],
)
def test_bad_party_names(tmp_path, parties):
    with pytest.raises(ConfigError):
        make_certificates(tmp_path, parties)


def test_bad_days(tmp_path):
    with pytest.raises(ConfigError):
        make_certificates(tmp_path, ["alice"], days=0)
