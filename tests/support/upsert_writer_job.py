"""One of two upserting writers of one table, run as a script, in lock-step with the other through two FIFOs.

Reads its arguments as JSON from standard input: ``catalog_name`` and ``catalog`` (its
properties), ``table``, ``sink_id``, ``role`` (``inside`` or ``outside``), ``rounds`` and
``keys`` (new keys per round, the same for both writers), and the FIFOs ``to_outside``
and ``to_inside``. Each round, both writers insert the same new keys with the sink's upsert
building blocks (write task, lookup, row delta commit):

- ``inside`` plans and runs its lookup, then, from its ``commit.before`` failpoint, tells
  ``outside`` it is about to commit and waits for it to have committed;
- ``outside`` waits for that word, upserts its own batch (its lookup sees no row of the
  keys either), commits and says so.

So every round the ``inside`` writer's commit lands on a snapshot holding the other
process's rows of its keys. Prints one JSON line: the lookups ``inside`` redid per round.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from pyiceberg.catalog import load_catalog

from icesink import failpoints
from tests.support.upserts import UpsertDriver, changes


def _word(stream: IO[str]) -> str:
    line = stream.readline()
    if not line:
        raise RuntimeError("the other writer ended before the round did")
    return line.strip()


def main(arguments: dict[str, Any]) -> dict[str, Any]:
    table = load_catalog(arguments["catalog_name"], **arguments["catalog"]).load_table(arguments["table"])
    driver = UpsertDriver(table, sink_id=arguments["sink_id"])
    inside = arguments["role"] == "inside"
    # Opened in the same order by both: each open waits for the other end.
    to_outside = open(arguments["to_outside"], "w" if inside else "r")  # noqa: SIM115
    to_inside = open(arguments["to_inside"], "r" if inside else "w")  # noqa: SIM115
    redos: list[int] = []
    for round_no in range(arguments["rounds"]):
        first = round_no * arguments["keys"]
        name = arguments["sink_id"]
        batch = changes(
            *[(k, f"{name}{k}", round_no, "c", 0) for k in range(first, first + arguments["keys"])]
        )
        if inside:

            def meet(_point: str, round_no: int = round_no) -> None:
                to_outside.write(f"{round_no}\n")
                to_outside.flush()
                if _word(to_inside) != str(round_no):
                    raise RuntimeError("the writers lost step")

            failpoints.arm("commit.before", "call", call=meet)
            redos.append(driver.apply(batch).redos)
        else:
            if _word(to_outside) != str(round_no):
                raise RuntimeError("the writers lost step")
            driver.apply(batch)
            to_inside.write(f"{round_no}\n")
            to_inside.flush()
    to_outside.close()
    to_inside.close()
    return {"sink_id": arguments["sink_id"], "redos": redos}


if __name__ == "__main__":
    print(json.dumps(main(json.load(sys.stdin))))
