"""Certificates for TLS tests, made by openssl: a CA, and server or client certificates it signs."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1")


@dataclass(frozen=True)
class Pair:
    """A certificate and its private key (PEM files)."""

    cert: Path
    key: Path


def make_ca(directory: Path, name: str = "schedwatch-test-ca") -> Pair:
    """A self-signed CA certificate and its key in *directory*."""
    directory.mkdir(parents=True, exist_ok=True)
    pair = Pair(directory / f"{name}.pem", directory / f"{name}.key")
    _openssl("req", "-x509", *EC_KEY, "-subj", f"/CN={name}", "-keyout", str(pair.key), "-out", str(pair.cert))
    return pair


def issue(ca: Pair, directory: Path, name: str, alt_names: str = "", usage: str = "serverAuth") -> Pair:
    """A certificate for *name* signed by *ca*; *alt_names* e.g. 'DNS:schedwatch,IP:127.0.0.1'; *usage*
    serverAuth or clientAuth."""
    pair = Pair(directory / f"{name}.pem", directory / f"{name}.key")
    extensions = ["-addext", "basicConstraints=critical,CA:FALSE", "-addext", f"extendedKeyUsage={usage}"]
    if alt_names:
        extensions += ["-addext", f"subjectAltName={alt_names}"]
    _openssl(
        "req",
        "-x509",
        "-CA",
        str(ca.cert),
        "-CAkey",
        str(ca.key),
        *EC_KEY,
        "-subj",
        f"/CN={name}",
        *extensions,
        "-keyout",
        str(pair.key),
        "-out",
        str(pair.cert),
    )
    return pair


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)
