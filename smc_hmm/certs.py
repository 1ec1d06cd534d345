"""Certificates for mutual TLS between parties (``smc-hmm certs``).

:func:`make_certificates` creates a small certificate authority (ECDSA P-256)
and, for every party, a key and a certificate whose subject CN *and* SAN DNS
name are the party name (a party's also ``localhost`` and ``127.0.0.1`` so that
loopback deployments work; a client's carries its name alone).  The TCP transport
checks a peer's party name against exactly these fields.  Files written to ``out_dir``:

``ca.pem``            the CA certificate (every party trusts it)
``<party>.pem``       the party's certificate
``<party>.key``       the party's private key (PKCS#8, unencrypted, mode 0600)

The CA's private key is *not* written: a directory made this way can mint no
further certificates, so adding a party means re-running the command for the
whole set.

A folder that already holds a ``ca.pem`` (or any of the files to be written) is
refused with :class:`~smc_hmm.errors.ConfigError` unless ``force=True``
(``smc-hmm certs --force``): a new CA invalidates every certificate of the old
set, so replacing one must be deliberate.  With ``force``, every ``<name>.pem``
in the folder that the *old* ``ca.pem`` issued is removed together with its
``<name>.key`` before the new set is written, so no stale certificate that no
longer verifies against the new CA is left behind (re-running for fewer parties
removes the dropped parties' files).  Other files are left alone.

Clients of a serving party (``smc-hmm serve``, ``clients=[...]``, ``smc-hmm certs
--clients``) get a certificate with the *client role*: extended key usage
``clientAuth`` only and the SAN URI :data:`CLIENT_ROLE_URI`.  A server accepts a
session only from a certificate of its CA that carries that role; a party
certificate (no role URI) cannot open a client session, and a client certificate
cannot act as a server (no ``serverAuth``).

Certificates are valid for ``days`` from 1 to :data:`MAX_CERT_DAYS` (ten years; a
longer validity is a key that can never be retired, and beyond the year 9999 dates
cannot be written at all): :func:`check_days`.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from smc_hmm.errors import ConfigError

__all__ = ["CLIENT_ROLE_URI", "CertificateSet", "make_certificates"]

#: SAN URI that marks a certificate as a client of a serving party (``smc-hmm serve``)
CLIENT_ROLE_URI = "urn:smc-hmm:role:client"

#: a party name usable as a DNS label-like identifier and a file name
PARTY_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class CertificateSet:
    """Paths written by :func:`make_certificates`."""

    ca_cert: Path
    certs: dict[str, Path]
    keys: dict[str, Path]
    #: files of a replaced set removed by ``force=True``: certificates the old CA
    #: issued and their keys, for parties not in the new set
    removed: tuple[Path, ...] = ()

    def tls_config(self, party: str):
        """The :class:`~smc_hmm.transport.tcp.TlsConfig` of ``party``."""
        from smc_hmm.transport.tcp import TlsConfig

        return TlsConfig(self.ca_cert, self.certs[party], self.keys[party])


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _write(path: Path, data: bytes, mode: int) -> None:
    try:
        # a fresh file (never through a symlink): existing ones were removed beforehand
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode)
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from e


def _prepare_dir(out: Path) -> None:
    """Create ``out`` (and parents) or raise ConfigError: never a raw OSError."""
    try:
        if out.exists() and not out.is_dir():
            raise ConfigError(f"cannot write certificates to {out}: it is not a directory")
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create directory {out}: {e.strerror or e}") from e
    if not os.access(out, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write certificates to {out}: permission denied")


def _issued_by_old_ca(out: Path) -> list[Path]:
    """Certificates in ``out`` that its current ``ca.pem`` issued, and their keys.

    Only ``<name>.pem`` files holding a certificate that verifies against the old CA
    are recognised; an unreadable or non-CA ``ca.pem`` recognises nothing.
    """
    try:
        ca = x509.load_pem_x509_certificate((out / "ca.pem").read_bytes())
    except (OSError, ValueError):
        return []
    found: list[Path] = []
    for pem in sorted(out.glob("*.pem")):
        if pem.name == "ca.pem" or not pem.is_file() or pem.is_symlink():
            continue
        try:
            cert = x509.load_pem_x509_certificate(pem.read_bytes())
            cert.verify_directly_issued_by(ca)
        except Exception:  # not a certificate, or not one of this CA's: not ours to remove
            continue
        found.append(pem)
        key = pem.with_suffix(".key")
        if key.is_file() and not key.is_symlink():
            found.append(key)
    return found


def _check_existing(out: Path, parties: list[str], force: bool) -> list[Path]:
    """Refuse to overwrite an existing set unless ``force``; else the files to remove
    first: the existing targets and the certificates (with keys) the old CA issued."""
    targets = [out / "ca.pem"]
    for p in parties:
        targets += [out / f"{p}.pem", out / f"{p}.key"]
    existing = [t for t in targets if t.exists() or t.is_symlink()]
    if not existing:
        return []
    if not force:
        what = (
            "a certificate set (ca.pem)"
            if (out / "ca.pem") in existing
            else ", ".join(t.name for t in existing)
        )
        raise ConfigError(
            f"{out} already holds {what}: a new CA invalidates every certificate of the old "
            "set; use --force (force=True) to replace it (certificates issued by the old CA "
            "and their keys are removed), or choose another --out"
        )
    new = set(targets)
    return existing + [f for f in _issued_by_old_ca(out) if f not in new]


def _check_parties(parties) -> list[str]:
    if isinstance(parties, str):
        parties = [p.strip() for p in parties.split(",")]
    parties = list(parties)
    if not parties:
        raise ConfigError("no party names given")
    for p in parties:
        if not isinstance(p, str) or not PARTY_NAME.match(p) or p == "ca":
            raise ConfigError(
                f"invalid party name {p!r}: use lower-case letters, digits, '-' and '_' "
                "(at most 63 characters, not 'ca')"
            )
    if len(set(parties)) != len(parties):
        raise ConfigError(f"duplicate party names in {parties}")
    return parties


#: the longest validity of a certificate, days (ten years)
MAX_CERT_DAYS = 3650


def check_days(days: object, name: str = "days") -> int:
    """``days`` if it is an integer from 1 to :data:`MAX_CERT_DAYS`, else
    :class:`ConfigError`."""
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_CERT_DAYS:
        raise ConfigError(f"{name} must be an integer from 1 to {MAX_CERT_DAYS}, got {days!r}")
    return days


def _key_usage(*, sign_certificates: bool) -> x509.KeyUsage:
    """A CA signs certificates (and CRLs); a party's key signs its TLS handshakes."""
    return x509.KeyUsage(
        digital_signature=not sign_certificates,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=sign_certificates,
        crl_sign=sign_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _ca_certificate(ca_key, subject, ski, validity) -> x509.Certificate:
    """The project CA: self-signed, may sign leaf certificates only (path length 0)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(sign_certificates=True), critical=True)
        .add_extension(ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _leaf_certificate(name: str, key, client: bool, ca, validity) -> x509.Certificate:
    """A party's certificate (server and client authentication, for ``name``, localhost
    and 127.0.0.1) or a client's (client authentication and the client role URI, for
    ``name`` alone: a client is never a TLS server, and a second name such as localhost
    would be a second identity)."""
    ca_key, ca_subject, ca_ski = ca
    names: list[x509.GeneralName] = [x509.DNSName(name)]
    if client:
        names.append(x509.UniformResourceIdentifier(CLIENT_ROLE_URI))
    else:
        names += [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if not client:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(_key_usage(sign_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _remove_stale(stale: list[Path]) -> None:
    """Remove the old CA's certificates and keys that a forced new set replaces."""
    for path in stale:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            raise ConfigError(f"cannot remove stale {path}: {e.strerror or e}") from e


def _write_leaf(out: Path, name: str, cert: x509.Certificate, key) -> tuple[Path, Path]:
    """Write ``name``'s certificate (``NAME.pem``) and private key (``NAME.key``, mode
    0600) to ``out``; their paths."""
    cert_path, key_path = out / f"{name}.pem", out / f"{name}.key"
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(
        key_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        0o600,
    )
    return cert_path, key_path


def make_certificates(
    out_dir,
    parties,
    days: int = 365,
    *,
    ca_name: str = "smc-hmm CA",
    force: bool = False,
    clients=(),
) -> CertificateSet:
    """Create a CA and one key + certificate per party in ``out_dir``.

    ``parties`` is a list of names (or a comma-separated string).  Returns the
    paths; key files are created with mode 0600.  A folder that already holds
    ``ca.pem`` or one of the party files is refused (:class:`ConfigError`)
    unless ``force``, which replaces the set and removes the certificates the old
    CA issued (and their keys) that the new set does not overwrite; they are
    listed in :attr:`CertificateSet.removed`.  An ``out_dir`` that is a file or
    cannot be created or written raises :class:`ConfigError`.  ``clients`` (names
    or a comma-separated string) get certificates with the client role.
    """
    parties = _check_parties(parties)
    clients = _check_parties(clients) if clients else []
    if set(clients) & set(parties):
        raise ConfigError(f"names both party and client: {sorted(set(clients) & set(parties))}")
    days = check_days(days)
    out = Path(out_dir)
    _prepare_dir(out)
    stale = _check_existing(out, parties + clients, force)
    now = datetime.datetime.now(datetime.timezone.utc)
    validity = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = _ca_certificate(ca_key, ca_subject, ca_ski, validity)
    ca_path = out / "ca.pem"
    _remove_stale(stale)
    _write(ca_path, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)

    certs: dict[str, Path] = {}
    keys: dict[str, Path] = {}
    for party in parties + clients:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _leaf_certificate(
            party, key, party in clients, (ca_key, ca_subject, ca_ski), validity
        )
        certs[party], keys[party] = _write_leaf(out, party, cert, key)
    written = {ca_path, *certs.values(), *keys.values()}
    return CertificateSet(ca_path, certs, keys, tuple(p for p in stale if p not in written))
