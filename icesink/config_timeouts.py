"""The bounded waits of the sink's configuration (``timeout.*``): how long a silent server is waited for.

Every call to a catalog or an object store, on the driver and in the write tasks, waits at
most these times; past them the batch fails with ``ICESINK-CATALOG`` or ``ICESINK-STORAGE``
naming the server (:mod:`icesink.bounded_waits` applies them).

The defaults are far above what a healthy server needs, even a slow one: a connection on
a working network opens in milliseconds (a lost SYN is resent after 1 s, then 3 s); an
object store's wait is a stall, not a transfer's length (a store that sends a byte a
second is never cut off), and the longest an object store is silent in ordinary work is
the few seconds some take to complete a large multipart upload; a REST catalog answers a
commit in well under a second, one under load in a few.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_CATALOG_REQUEST_TIMEOUT_S = 60.0
DEFAULT_STORAGE_REQUEST_TIMEOUT_S = 30.0


class TimeoutConfig(BaseModel):
    """How long the sink waits for a catalog or an object store before the batch fails."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connect_s: float = Field(
        default=DEFAULT_CONNECT_TIMEOUT_S,
        gt=0,
        allow_inf_nan=False,
        description="Seconds to wait for a connection to the catalog (REST server, PostgreSQL) or the "
        "object store to open (``timeout.connect-s``, default 10). The S3 client tries each request "
        "3 times. A catalog property ``s3.connect-timeout`` (or ``connect_timeout`` in a PostgreSQL "
        "``uri``) wins over it.",
    )
    catalog_request_s: float = Field(
        default=DEFAULT_CATALOG_REQUEST_TIMEOUT_S,
        gt=0,
        allow_inf_nan=False,
        description="Seconds to wait for a catalog's answer once connected (``timeout.catalog-request-s``, "
        "default 60): a REST catalog's silence between two bytes of its answer, a PostgreSQL "
        "catalog's statement (``statement_timeout``, unless the ``uri`` sets ``options``). A SQLite "
        "catalog waits its driver's 5 s for a lock (``?timeout=`` in the ``uri`` changes it). A "
        "commit whose answer never came has an unknown outcome: the next batch or run finds out "
        "from the table which batches it holds.",
    )
    storage_request_s: float = Field(
        default=DEFAULT_STORAGE_REQUEST_TIMEOUT_S,
        gt=0,
        allow_inf_nan=False,
        description="Seconds an S3 request may go without a byte moving (``timeout.storage-request-s``, "
        "default 30; the S3 client's own default is 3 s, which cuts off a slow store's long "
        "operations). Each request is tried 3 times, so a frozen store fails a call after about "
        "3 times this. The catalog property ``s3.request-timeout`` wins over it.",
    )
