"""Environment references in a job's configuration: ``${env:NAME}`` stands for the variable ``NAME``.

Credentials (S3 keys, a catalog's credential, a SASL password) then live in the job's
environment (a Kubernetes secret, a systemd credential, a CI variable) instead of the YAML
file or the command line, where the process list shows them::

    sink:
      catalog.credential: ${env:ICEBERG_CREDENTIAL}
      catalog.s3.secret-access-key: ${env:S3_SECRET_ACCESS_KEY}

A reference may be the whole value or a part of it (``postgresql+psycopg2://ingest:${env:PG_PASSWORD}@db/catalog``);
``$${env:...}`` is kept literally, as ``${env:...}``. A reference to a variable that is not
set fails before the job starts, naming the key and the variable, never a value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from icesink import ConfigError

_REFERENCE = re.compile(r"(\$?)\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(data: Any, environ: Mapping[str, str] | None = None, key: str = "") -> Any:
    """``data`` (mappings, lists, scalars) with every ``${env:NAME}`` in its strings replaced.

    Args:
        data: A configuration: the YAML file's content, flags applied.
        environ: The variables; this process's environment by default.
        key: The dotted key of ``data`` (for messages).

    Raises:
        ConfigError: A referenced variable is not set; names the key and the variable.
    """
    env = os.environ if environ is None else environ
    if isinstance(data, Mapping):
        return {k: expand_env(v, env, f"{key}.{k}" if key else str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [expand_env(v, env, f"{key}[{i}]") for i, v in enumerate(data)]
    if not isinstance(data, str) or "${env:" not in data:
        return data

    def substitute(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped:
            return match.group(0)[1:]
        if name not in env:
            raise ConfigError(
                f"key {key!r} refers to the environment variable {name!r}, which is not set",
                hint=f"export {name} in the job's environment, or give the value itself",
            )
        return env[name]

    return _REFERENCE.sub(substitute, data)
