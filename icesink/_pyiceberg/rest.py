"""pyiceberg's REST catalog from the inside: a cheap look at the current metadata, and commits not parsed.

A REST catalog answers a table load and a commit with the table's whole metadata (every
snapshot kept); pyiceberg parses it with pydantic at each, which at 2,000 snapshots costs
more than building the snapshot. Here, a load asks for the referenced snapshots only
(``snapshots=refs``), just to learn the current metadata file; and a commit's answer is
read as plain JSON and checked against the updates applied to the metadata in hand, which
is kept when the two agree (the server's metadata is parsed as usual when they do not).
This is pyiceberg-internal code (the catalog's session, endpoints, retries and error
mapping) kept beside :mod:`icesink._pyiceberg`, which holds the rest of it.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from pyiceberg.catalog import TOKEN, Catalog
from pyiceberg.catalog.rest import (
    AUTHORIZATION_HEADER,
    BEARER_PREFIX,
    Capability,
    Endpoints,
    RestCatalog,
    TableResponse,
    _retry_hook,
)
from pyiceberg.catalog.rest.response import _handle_non_200_response
from pyiceberg.exceptions import (
    AuthorizationExpiredError,
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchTableError,
    UnauthorizedError,
)
from pyiceberg.table import CommitTableRequest, CommitTableResponse, Table, TableIdentifier
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableRequirement, TableUpdate
from requests import HTTPError, Response, Session
from tenacity import retry, retry_if_exception_type, stop_after_attempt

from icesink._pyiceberg import updated_metadata

_LISTS = {"snapshots": "snapshots", "snapshot_log": "snapshot-log", "metadata_log": "metadata-log"}
"""Fields that grow with the history, compared by length and ends (the rest is taken from the base)."""

_retry_once = retry(  # as pyiceberg's own requests: once more after the token is refreshed
    retry=retry_if_exception_type((AuthorizationExpiredError, UnauthorizedError)),
    stop=stop_after_attempt(2),
    before_sleep=_retry_hook,
    reraise=True,
)


class BoundedRestCatalog(RestCatalog):
    """pyiceberg's REST catalog whose requests wait at most ``timeout`` (``requests``' connect, read).

    pyiceberg's own sessions have no timeout: a silent server would hold a request (and
    the streaming query) for ever. The session made at start-up for the configuration
    request is bounded as well as the catalog's own.
    """

    def __init__(self, name: str, timeout: tuple[float, float], **properties: str) -> None:
        self._timeout = timeout  # before the base class's start-up requests
        super().__init__(name, **properties)

    def _create_session(self) -> Session:
        return _bounded(super()._create_session(), self._timeout)


def _bounded(session: Session, timeout: tuple[float, float]) -> Session:
    """``session``, its requests given ``timeout`` unless they name one."""
    request = session.request

    def bounded_request(method: str, url: str | bytes, **kwargs: Any) -> Response:
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = timeout
        return request(method, url, **kwargs)

    session.request = bounded_request  # type: ignore[method-assign,assignment]
    return session


def rest_catalog(catalog: Catalog) -> RestCatalog | None:
    """``catalog`` when it is pyiceberg's REST catalog."""
    return catalog if isinstance(catalog, RestCatalog) else None


def table_on(
    catalog: RestCatalog, identifier: tuple[str, ...], metadata: TableMetadata, location: str
) -> Table | None:
    """The table as the catalog's load makes it, on ``metadata`` read from ``location``, if still current.

    Asks for the table with its referenced snapshots only (a small answer however long the
    history); its configuration and storage credentials are taken from that answer, as a
    full load takes them. ``None`` when the catalog names another metadata file.

    Raises:
        NoSuchTableError: The table does not exist.
    """
    answer = _load_refs(catalog, identifier)
    if answer.metadata_location != location:
        return None
    return catalog._response_to_table(identifier, answer.model_copy(update={"metadata": metadata}))


@_retry_once
def _load_refs(catalog: RestCatalog, identifier: tuple[str, ...]) -> TableResponse:
    catalog._check_endpoint(Capability.V1_LOAD_TABLE)
    path = catalog._split_identifier_for_path(identifier)
    response = catalog._session.get(catalog.url(Endpoints.load_table, **path), params={"snapshots": "refs"})
    try:
        response.raise_for_status()
    except HTTPError as e:
        _handle_non_200_response(e, {404: NoSuchTableError})
    return TableResponse.model_validate_json(response.text)


def commit_table_updates(
    catalog: RestCatalog,
    table: Table,
    updates: tuple[TableUpdate, ...],
    requirements: tuple[TableRequirement, ...],
) -> None:
    """Commit prepared updates as ``RestCatalog.commit_table`` and ``Table._do_commit`` do, parsing less.

    The table takes the new metadata: ``updates`` applied to its metadata
    (:func:`icesink._pyiceberg.updated_metadata`) with the server's ``last-updated-ms``, when
    that says what the server's answer says (:func:`agrees`); the server's metadata,
    parsed, when not. Old metadata files are deleted where the table's properties ask.

    Raises:
        CommitFailedException: A requirement no longer holds (a concurrent commit).
        CommitStateUnknownException: The server failed after the request was sent.
    """
    base, base_location = table.metadata, table.metadata_location
    answer = json.loads(_post_commit(catalog, table, requirements, updates))
    metadata = server_metadata(updated_metadata(base, updates, base_location), answer["metadata"])
    if metadata.table_uuid != base.table_uuid:
        raise ValueError(
            f"Table UUID does not match: current={base.table_uuid} != refreshed={metadata.table_uuid}"
        )
    try:
        catalog._delete_old_metadata(table.io, base, metadata)
    except Exception as e:  # as pyiceberg: the commit stands
        warnings.warn(f"Failed to delete old metadata after commit: {e}", stacklevel=2)
    table.metadata, table.metadata_location = metadata, answer["metadata-location"]


def server_metadata(local: TableMetadata, answer: dict[str, Any]) -> TableMetadata:
    """The metadata of a commit's JSON ``answer`` (its ``metadata``): ``local`` if they agree, else parsed."""
    local = local.model_copy(update={"last_updated_ms": answer.get("last-updated-ms")})
    if agrees(local, answer):
        return local
    return CommitTableResponse.model_validate({"metadata": answer, "metadata-location": ""}).metadata


def agrees(local: TableMetadata, answer: dict[str, Any]) -> bool:
    """Whether ``local`` says what the server's metadata ``answer`` (JSON) says.

    Every field is compared as JSON (an empty list or map as absent, which pyiceberg
    and servers write either way), except the lists that grow with the history
    (snapshots, snapshot log, metadata log): those by length and by their first and last
    entries, the others being the base's, which the server does not rewrite on a commit.
    """
    if _fields(json.loads(local.model_dump_json(exclude=set(_LISTS)))) != _fields(answer):
        return False
    for field, key in _LISTS.items():
        entries, theirs = getattr(local, field), answer.get(key, [])
        if len(entries) != len(theirs):
            return False
        if entries and any(json.loads(entries[i].model_dump_json()) != theirs[i] for i in (0, -1)):
            return False
    return True


def _fields(metadata: dict[str, Any]) -> dict[str, Any]:
    """The fields of metadata JSON but the long lists; an empty list or map counts as absent."""
    return {
        key: value for key, value in metadata.items() if key not in _LISTS.values() and value not in ([], {})
    }


@_retry_once
def _post_commit(
    catalog: RestCatalog,
    table: Table,
    requirements: tuple[TableRequirement, ...],
    updates: tuple[TableUpdate, ...],
) -> str:
    """``RestCatalog.commit_table``'s request; the answer's text, not parsed."""
    catalog._check_endpoint(Capability.V1_UPDATE_TABLE)
    identifier = table.name()
    request = CommitTableRequest(
        identifier=TableIdentifier(namespace=identifier[:-1], name=identifier[-1]),
        requirements=requirements,
        updates=updates,
    )
    headers = catalog._session.headers
    if token := table.config.get(TOKEN):
        headers[AUTHORIZATION_HEADER] = f"{BEARER_PREFIX} {token}"
    response = catalog._session.post(
        catalog.url(Endpoints.update_table, **catalog._split_identifier_for_path(request.identifier)),
        data=request.model_dump_json().encode("utf-8"),
        headers=headers,
    )
    try:
        response.raise_for_status()
    except HTTPError as e:
        unknown = {status: CommitStateUnknownException for status in (500, 502, 504)}
        _handle_non_200_response(e, {409: CommitFailedException, **unknown})
    return response.text
