"""make_certificates: a CA and per-party certificates usable for mutual TLS."""

from __future__ import annotations

import ipaddress
import os
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from smc_hmm.certs import make_certificates
from smc_hmm.cli import main
from smc_hmm.errors import ConfigError


def _assert_consistent(folder, parties):
    """Exactly ca.pem and the parties' files, every certificate issued by that CA."""
    ca = x509.load_pem_x509_certificate((folder / "ca.pem").read_bytes())
    pems = sorted(p.stem for p in folder.glob("*.pem") if p.name != "ca.pem")
    keys = sorted(p.stem for p in folder.glob("*.key"))
    assert pems == keys == sorted(parties)
    for party in parties:
        cert = x509.load_pem_x509_certificate((folder / f"{party}.pem").read_bytes())
        cert.verify_directly_issued_by(ca)
        key = load_pem_private_key((folder / f"{party}.key").read_bytes(), password=None)
        assert key.public_key() == cert.public_key()


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


def test_forced_rerun_overwrites_with_fresh_keys(tmp_path):
    first = make_certificates(tmp_path, ["alice", "bob"]).keys["alice"].read_bytes()
    again = make_certificates(tmp_path, ["alice", "bob"], force=True)
    assert again.keys["alice"].read_bytes() != first
    assert stat.S_IMODE(again.keys["alice"].stat().st_mode) == 0o600
    assert again.removed == ()
    _assert_consistent(tmp_path, ["alice", "bob"])


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


# -- an existing certificate set, --out errors ------------------------------------------


def test_existing_set_is_refused_without_force(tmp_path):
    make_certificates(tmp_path, ["alice", "bob", "carol"])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ConfigError, match=r"already holds a certificate set.*--force"):
        make_certificates(tmp_path, ["alice", "bob"])
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing touched


def test_party_files_without_a_ca_are_refused_without_force(tmp_path):
    (tmp_path / "bob.key").write_text("someone's key")
    with pytest.raises(ConfigError, match="already holds bob.key"):
        make_certificates(tmp_path, ["alice", "bob"])
    assert (tmp_path / "bob.key").read_text() == "someone's key"
    out = make_certificates(tmp_path, ["alice", "bob"], force=True)
    assert out.removed == ()
    _assert_consistent(tmp_path, ["alice", "bob"])


def test_force_for_fewer_parties_removes_the_stale_certificates(tmp_path):
    make_certificates(tmp_path, ["alice", "bob", "carol", "dave"])
    foreign = make_certificates(tmp_path / "other", ["erin"])
    (tmp_path / "erin.pem").write_bytes(foreign.certs["erin"].read_bytes())  # another CA's
    (tmp_path / "notes.pem").write_text("not a certificate")
    (tmp_path / "parties.toml").write_text("[run]\n")
    out = make_certificates(tmp_path, ["alice", "bob"], force=True)
    assert sorted(p.name for p in out.removed) == ["carol.key", "carol.pem", "dave.key", "dave.pem"]
    for name in ("carol.pem", "carol.key", "dave.pem", "dave.key"):
        assert not (tmp_path / name).exists()
    # files the old CA did not issue are left alone
    assert (tmp_path / "erin.pem").read_bytes() == foreign.certs["erin"].read_bytes()
    assert (tmp_path / "notes.pem").read_text() == "not a certificate"
    assert (tmp_path / "parties.toml").exists()
    (tmp_path / "erin.pem").unlink()
    (tmp_path / "notes.pem").unlink()
    _assert_consistent(tmp_path, ["alice", "bob"])


def test_force_never_writes_through_a_symlink(tmp_path):
    make_certificates(tmp_path / "pki", ["alice"])
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "pki" / "alice.key").unlink()
    (tmp_path / "pki" / "alice.key").symlink_to(victim)
    make_certificates(tmp_path / "pki", ["alice"], force=True)
    assert victim.read_text() == "precious"
    assert not (tmp_path / "pki" / "alice.key").is_symlink()
    _assert_consistent(tmp_path / "pki", ["alice"])


def test_out_that_is_a_file_or_unwritable(tmp_path):
    existing = tmp_path / "file"
    existing.write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        make_certificates(existing, ["alice"])
    with pytest.raises(ConfigError, match="cannot create directory"):
        make_certificates(existing / "sub", ["alice"])
    assert existing.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_out_without_write_permission(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(ConfigError, match="permission denied"):
            make_certificates(locked, ["alice"])
        with pytest.raises(ConfigError, match="cannot create directory"):
            make_certificates(locked / "sub", ["alice"])
    finally:
        locked.chmod(0o700)


def test_cli_errors_are_one_line_and_force_reports_removals(tmp_path, capsys):
    existing = tmp_path / "file"
    existing.write_text("x")
    for out in (existing, existing / "sub"):
        assert main(["certs", "--out", str(out), "--parties", "alice"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("smc-hmm: error: ConfigError: ") and len(err.splitlines()) == 1
    pki = str(tmp_path / "pki")
    assert main(["certs", "--out", pki, "--parties", "alice,bob,trent"]) == 0
    capsys.readouterr()
    assert main(["certs", "--out", pki, "--parties", "alice,bob"]) == 2
    err = capsys.readouterr().err
    assert "ConfigError" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert main(["certs", "--out", pki, "--parties", "alice,bob", "--force"]) == 0
    out = capsys.readouterr().out
    out = out.replace("\n", "")
    assert "removed stale" in out and "trent.pem" in out and "trent.key" in out
    _assert_consistent(tmp_path / "pki", ["alice", "bob"])


def test_unwritable_out_even_as_root(tmp_path, monkeypatch):
    """The permission paths, simulated (root ignores directory permissions)."""
    import smc_hmm.certs as certs_module

    monkeypatch.setattr(certs_module.os, "access", lambda path, mode: False)
    with pytest.raises(ConfigError, match="permission denied"):
        make_certificates(tmp_path / "a", ["alice"])
    monkeypatch.undo()

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(certs_module.Path, "mkdir", refuse)
    with pytest.raises(ConfigError, match="cannot create directory .*Permission denied"):
        make_certificates(tmp_path / "b", ["alice"])
    monkeypatch.undo()

    real_open = os.open

    def full_disk(path, *args, **kwargs):
        if str(path).endswith(".key"):
            raise OSError(28, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(certs_module.os, "open", full_disk)
    with pytest.raises(ConfigError, match=r"cannot write .*alice\.key: No space left"):
        make_certificates(tmp_path / "c", ["alice"])


def test_a_tls_file_that_does_not_load_is_named_not_a_repr(tmp_path):
    """A bad TLS file used to be reported as "cannot load TLS files TlsConfig(ca_cert=...,
    cert=..., key=...): [X509: ...] ..."; now the message names the file and the reason."""
    from smc_hmm.transport.tcp.tls import TlsConfig

    certs = make_certificates(tmp_path / "certs", "alice,bob")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError) as info:
        TlsConfig(junk, certs.certs["alice"], certs.keys["alice"]).client_context()
    assert str(info.value).startswith(f"cannot load the CA certificate {junk}: ")
    with pytest.raises(ConfigError) as info:
        TlsConfig(certs.ca_cert, certs.certs["alice"], certs.keys["bob"]).server_context()
    message = str(info.value)
    assert f"certificate {certs.certs['alice']} with its key {certs.keys['bob']}" in message
    assert "TlsConfig(" not in message and "[X509" not in message
