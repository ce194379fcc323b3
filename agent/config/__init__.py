"""schedwatch's configuration: flags and SCHEDWATCH_* environment variables, validated once into typed settings.

Every flag is declared once, in the flag table (:mod:`.table`); its environment variable follows from its name by
one rule (:func:`.flag.variable_of`). A flag on the command line wins over its variable, the variable over a
deprecated older name, and that over the default (:mod:`.resolve`). One module per job:

- :mod:`.values`: what a flag's text may be (converters, bounds, what the kernel-map sizes cost);
- :mod:`.flag`: what a flag is, its groups and its variable's name;
- :mod:`.table`: the flag table;
- :mod:`.resolve`: a flag's value from the command line, its variable or its default;
- :mod:`.settings`: the agent's settings (`run`, `check`, and the commands that load the collectors);
- :mod:`.client`: how `--from` reaches an agent or a Prometheus (TLS, basic auth).

How each command shows and takes its flags is the commands' side: agent/commands/agent_flags.py and
agent/commands/parser.py. docs/configuration.md lists every flag.
"""

from agent.config.client import ClientSettings, client_from_args
from agent.config.flag import (
    AGENT_GROUPS,
    CLIENT,
    COLLECTION,
    EXPORT,
    GROUPS,
    LOGGING,
    NOT_GIVEN,
    OFF_BY_DEFAULT,
    RUNTIME,
    SERVING,
    Flag,
    collector_flag,
    dest_of,
    variable_of,
)
from agent.config.resolve import ConfigError, DeprecatedVariable, deprecated_variables, given, resolve
from agent.config.settings import Settings, from_args, web_security
from agent.config.table import FLAGS, flags_of
from agent.config.values import (
    BYTES_PER_CGROUP,
    BYTES_PER_PROCESS,
    BYTES_PER_THREAD,
    BYTES_PER_TIMED_WORKLOAD,
    DEFAULT_LISTEN,
    DEFAULT_PORT,
    MODES,
    boolean,
    choice,
    count,
    listen_address,
    optional_path,
    seconds,
)

__all__ = [
    "AGENT_GROUPS",
    "BYTES_PER_CGROUP",
    "BYTES_PER_PROCESS",
    "BYTES_PER_THREAD",
    "BYTES_PER_TIMED_WORKLOAD",
    "CLIENT",
    "COLLECTION",
    "DEFAULT_LISTEN",
    "DEFAULT_PORT",
    "EXPORT",
    "FLAGS",
    "GROUPS",
    "LOGGING",
    "MODES",
    "NOT_GIVEN",
    "OFF_BY_DEFAULT",
    "RUNTIME",
    "SERVING",
    "ClientSettings",
    "ConfigError",
    "DeprecatedVariable",
    "Flag",
    "Settings",
    "boolean",
    "choice",
    "client_from_args",
    "collector_flag",
    "count",
    "deprecated_variables",
    "dest_of",
    "flags_of",
    "from_args",
    "given",
    "listen_address",
    "optional_path",
    "resolve",
    "seconds",
    "variable_of",
    "web_security",
]
