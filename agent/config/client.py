"""How `diagnose --from` (and `top --from`) reaches an agent or a Prometheus: TLS and basic auth, from the client
group's flags and their variables."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from agent.config.flag import CLIENT
from agent.config.resolve import ConfigError, resolve
from agent.config.table import flags_of


@dataclass(frozen=True)
class ClientSettings:
    """How diagnose reaches the agent or the Prometheus named by --from: TLS and basic auth (the CLIENT flags)."""

    tls_ca_file: Path | None = None  # None: the system's CAs
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_server_name: str = ""  # "": the host in the URL
    basic_auth_user: str = ""
    basic_auth_password_file: Path | None = None

    @property
    def uses_tls(self) -> bool:
        """Whether any TLS option is set (they mean nothing to an http:// URL)."""
        return any((self.tls_ca_file, self.tls_cert_file, self.tls_key_file, self.tls_server_name))


def client_from_args(args: argparse.Namespace) -> ClientSettings:
    """The client settings from the CLIENT flags and their variables; raises ConfigError when they do not fit."""
    value = resolve(args, flags_of([CLIENT]))
    client = ClientSettings(
        tls_ca_file=value["from_tls_ca_file"],
        tls_cert_file=value["from_tls_cert_file"],
        tls_key_file=value["from_tls_key_file"],
        tls_server_name=value["from_tls_server_name"].strip(),
        basic_auth_user=value["from_basic_auth_user"],
        basic_auth_password_file=value["from_basic_auth_password_file"],
    )
    if (client.tls_cert_file is None) != (client.tls_key_file is None):
        raise ConfigError("--from.tls-cert-file and --from.tls-key-file go together: give both or neither")
    if bool(client.basic_auth_user) != (client.basic_auth_password_file is not None):
        raise ConfigError(
            "--from.basic-auth-user and --from.basic-auth-password-file go together: give both or neither"
        )
    return client
