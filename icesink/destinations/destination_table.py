"""One table a routed batch's rows go to, as the projection and its slots see it.

Its own module, below :mod:`icesink.destinations.projection` and
:mod:`icesink.destinations.slots` that both read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.schema import Schema


@dataclass(frozen=True)
class DestinationTable:
    """One table a batch's rows go to.

    Attributes:
        index: The index its rows carry.
        table: The table's identifier.
        schema: The table's schema (after the batch's schema step).
        columns: Positions of the batch columns offered to it (non-null in its rows).
    """

    index: int
    table: str
    schema: Schema
    columns: tuple[int, ...]
