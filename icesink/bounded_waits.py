"""Bounded waits for every catalog and object store call, and coded errors naming the server.

The waits of ``timeout.*`` (:class:`~icesink.config_timeouts.TimeoutConfig`) reach each
client where it is made:

- the S3 file systems of pyiceberg's FileIOs, on the driver and in the write tasks, through
  the FileIO properties ``s3.connect-timeout`` and ``s3.request-timeout`` (pyarrow's and
  s3fs's own timeouts; properties the user set win);
- a REST catalog's HTTP session (:class:`icesink._pyiceberg.rest.BoundedRestCatalog`: a
  connect and a read timeout on every request, the configuration request at start-up too);
- a PostgreSQL catalog's connections, through its URI: ``connect_timeout`` and the
  ``statement_timeout`` of ``options`` (unless the URI sets them). A SQLite catalog waits
  its driver's busy timeout (5 s unless the URI's ``timeout`` says otherwise).

:func:`server_errors` turns what those clients raise when a server is unreachable, refuses
or stays silent into ``ICESINK-CATALOG`` and ``ICESINK-STORAGE`` errors naming the server.
A PostgreSQL server that is frozen (not merely slow) is not detected by either of its
timeouts, which its own process enforces.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from urllib.parse import urlparse

from requests import RequestException
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from icesink.config import SinkConfig
from icesink.config_timeouts import TimeoutConfig
from icesink.errors import CatalogError, SinkError, StorageError, find_error_code

S3_CONNECT_TIMEOUT = "s3.connect-timeout"
S3_REQUEST_TIMEOUT = "s3.request-timeout"
_POSTGRES_DRIVERS = ("psycopg2", "psycopg")  # libpq's connection parameters in the URI's query


def catalog_properties(config: SinkConfig) -> dict[str, str]:
    """The catalog's properties for pyiceberg, with the bounded waits of ``timeout.*`` added.

    They reach every FileIO made from them (the catalog's, the sink's state, the write
    tasks'): FileIOs read their own properties and pass the rest by.
    """
    properties = config.catalog.plain_properties()
    timeouts = config.timeouts
    properties.setdefault(S3_CONNECT_TIMEOUT, _seconds(timeouts.connect_s))
    properties.setdefault(S3_REQUEST_TIMEOUT, _seconds(timeouts.storage_request_s))
    uri = properties.get("uri", "")
    if uri.startswith("postgresql"):
        properties["uri"] = _postgres_uri(uri, timeouts)
    return properties


def rest_timeout(config: SinkConfig) -> tuple[float, float]:
    """The ``(connect, read)`` timeout of every request to a REST catalog (as ``requests`` takes it)."""
    return (config.timeouts.connect_s, config.timeouts.catalog_request_s)


def _seconds(value: float) -> str:
    return f"{value:g}"


def _postgres_uri(uri: str, timeouts: TimeoutConfig) -> str:
    """``uri`` with libpq's ``connect_timeout`` and a ``statement_timeout``, unless it sets them."""
    url = make_url(uri)
    if url.get_driver_name() not in _POSTGRES_DRIVERS:
        return uri
    query: dict[str, str] = {}
    if "connect_timeout" not in url.query:
        query["connect_timeout"] = str(max(2, math.ceil(timeouts.connect_s)))  # whole seconds, 2 at least
    if "options" not in url.query:
        query["options"] = f"-c statement_timeout={math.ceil(timeouts.catalog_request_s * 1000)}"
    return url.update_query_dict(query).render_as_string(hide_password=False) if query else uri


def catalog_server(config: SinkConfig) -> str:
    """The catalog as an error names it: its name and where it is (secrets masked)."""
    uri = config.catalog.plain_properties().get("uri", "")
    where = f" at {config.catalog.redact(uri)}" if uri else ""
    return f"catalog {config.catalog.name!r}{where}"


def storage_server(config: SinkConfig) -> str:
    """The object store as an error names it: its endpoint, else the warehouse's."""
    properties = config.catalog.plain_properties()
    if endpoint := properties.get("s3.endpoint"):
        return f"object store at {endpoint}"
    where = config.state_location or properties.get("warehouse", "")
    scheme = urlparse(where).scheme or "file"
    return f"{scheme} storage of {where}" if where else "the tables' storage"


@contextlib.contextmanager
def server_errors(config: SinkConfig, **context: object) -> Iterator[None]:
    """Raise a catalog's or object store's client failures inside as ``ICESINK-CATALOG``/``-STORAGE``.

    Other icesink errors pass unchanged (a commit whose answer never came stays
    ``ICESINK-COMMIT``: its outcome is unknown, which matters more), but for a write job
    whose tasks' storage failed: that names the object store. ``context`` (``table``,
    ``batch_id``) goes with the error.
    """
    try:
        yield
    except (CatalogError, StorageError):
        raise
    except Exception as e:
        translated = _translated(e, config, context)
        if translated is None:
            raise
        raise translated from e


def _translated(error: Exception, config: SinkConfig, context: dict[str, object]) -> SinkError | None:
    """The coded error naming the server for ``error``, or ``None`` when no server failed."""
    if isinstance(error, SinkError):
        if not _storage_failed_in_tasks(error):
            return None
        what = error.message
    elif isinstance(error, RequestException | DBAPIError):
        what = f"{type(error).__name__}: {error}"
        return CatalogError(
            f"{catalog_server(config)} is unreachable or did not answer: {config.catalog.redact(what)}",
            hint="check that the catalog server is up and reachable; timeout.connect-s and "
            "timeout.catalog-request-s bound the wait; the next batch (or a restart) goes on "
            "where this stopped",
            **context,
        )
    elif isinstance(error, OSError) and not isinstance(error, ConnectionError):
        what = f"{type(error).__name__}: {error}"  # a socket's own ConnectionError is Spark's or py4j's
    else:
        return None
    return StorageError(
        f"{storage_server(config)} failed or did not answer: {config.catalog.redact(what)}",
        hint="check that the object store is up and reachable and the credentials allow the write; "
        "timeout.connect-s and timeout.storage-request-s bound the wait; "
        "the next batch (or a restart) goes on where this stopped",
        **context,
    )


def _storage_failed_in_tasks(error: SinkError) -> bool:
    """Whether ``error`` (a write job's) was caused by a task's ``ICESINK-STORAGE``, which arrives as text."""
    cause = error.__cause__
    return (
        cause is not None and not isinstance(cause, SinkError) and find_error_code(str(cause)) is StorageError
    )
