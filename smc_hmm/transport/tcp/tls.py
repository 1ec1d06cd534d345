"""Mutual TLS of the TCP transport: the TLS configuration of a party and what a peer's
verified certificate says about it.

TLS 1.3 only, ``CERT_REQUIRED`` on both sides, and each side checks that the peer's
certificate names the party it claims to be (subject CN or SAN DNS name).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from smc_hmm.errors import AuthenticationError, ConfigError

__all__ = ["TlsConfig", "cert_names", "check_identity", "peer_identity"]


@dataclass(frozen=True)
class TlsConfig:
    """Paths of the CA certificate, this party's certificate and its private key."""

    ca_cert: str | Path
    cert: str | Path
    key: str | Path

    def _context(self, purpose: int) -> ssl.SSLContext:
        ctx = ssl.SSLContext(purpose)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.verify_mode = ssl.CERT_REQUIRED
        if purpose == ssl.PROTOCOL_TLS_CLIENT:
            ctx.check_hostname = False  # we check the party name ourselves (CN / SAN)
        try:
            ctx.load_verify_locations(cafile=str(self.ca_cert))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load the CA certificate {self.ca_cert}: {_reason(exc)}"
            ) from exc
        try:
            ctx.load_cert_chain(certfile=str(self.cert), keyfile=str(self.key))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load the certificate {self.cert} with its key {self.key}: {_reason(exc)}"
            ) from exc
        return ctx

    def server_context(self) -> ssl.SSLContext:
        return self._context(ssl.PROTOCOL_TLS_SERVER)

    def client_context(self) -> ssl.SSLContext:
        return self._context(ssl.PROTOCOL_TLS_CLIENT)


def _reason(exc: BaseException) -> str:
    """Why a TLS file did not load, in words (not the exception's tuple)."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return f"{exc.reason} ({exc.library or 'ssl'})"
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def cert_names(cert: dict | None) -> set[str]:
    """Subject CNs and SAN DNS names of a verified peer certificate."""
    names: set[str] = set()
    if not cert:
        return names
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                names.add(value)
    for kind, value in cert.get("subjectAltName", ()):
        if kind == "DNS":
            names.add(value)
    return names


def peer_identity(sock) -> tuple[set[str], set[str]]:
    """(names, URIs) of the verified peer certificate of a TLS socket (empty if plain)."""
    if not isinstance(sock, ssl.SSLSocket):
        return set(), set()
    cert = sock.getpeercert()
    uris = {v for k, v in (cert or {}).get("subjectAltName", ()) if k == "URI"}
    return cert_names(cert), uris


def check_identity(sock, expected: str) -> None:
    if not isinstance(sock, ssl.SSLSocket):
        return
    names = cert_names(sock.getpeercert())
    if expected not in names:
        raise AuthenticationError(
            f"peer certificate names {sorted(names)}, expected party {expected!r}"
        )
