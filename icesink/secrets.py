"""Credentials among the catalog properties: kept as ``SecretStr``, masked wherever they are shown.

A property is a secret when its key names a credential (``s3.secret-access-key``,
``token``, ``credential``, ...), and a URI with a password in its user info
(``postgresql://user:PASSWORD@host/db``) shows everything but the password. Error texts
from catalogs and drivers, which may quote a connection string, pass through
:func:`redact` before they reach a message, a log line or a chained exception.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, unquote

from pydantic import SecretStr

# Catalog properties whose values are credentials: kept as SecretStr, never logged.
_SECRET_KEY_PATTERN = re.compile(r"(password|secret|token|credential|session-key|access-key)", re.IGNORECASE)
# The password of a URI's user info: ``scheme://user:PASSWORD@host`` (a database URI, say).
_URI_PASSWORD = re.compile(
    r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:)(?P<password>[^/?#]*)(?P<tail>@.*)$", re.S
)
_REDACTED = "***"


class SecretUri(SecretStr):
    """A URI with a password in it: shown with the password masked, revealed only for pyiceberg."""

    def _display(self) -> str:
        match = _URI_PASSWORD.match(self.get_secret_value())
        return f"{match['head']}{_REDACTED}{match['tail']}" if match else _REDACTED

    def password(self) -> str:
        """The password part, as written in the URI (percent-encoded)."""
        match = _URI_PASSWORD.match(self.get_secret_value())
        return match["password"] if match else self.get_secret_value()


def hidden(key: str, value: str) -> str | SecretStr:
    """``value``, kept secret when its key names a credential or it is a URI holding a password."""
    if _SECRET_KEY_PATTERN.search(key):
        return SecretStr(value)
    if _URI_PASSWORD.match(value):
        return SecretUri(value)
    return value


def redact(text: str, values: Iterable[object]) -> str:
    """``text`` with every secret among ``values`` masked.

    Each secret is masked as written, percent-decoded and percent-encoded, longest first, so a driver that
    quotes its connection string, or the decoded password, shows neither.
    """
    secrets: set[str] = set()
    for value in values:
        if isinstance(value, SecretStr):
            raw = value.password() if isinstance(value, SecretUri) else value.get_secret_value()
            secrets.update(s for s in (raw, unquote(raw), quote(raw, safe="")) if s)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, _REDACTED)
    return text
