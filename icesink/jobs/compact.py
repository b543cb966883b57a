"""``icesink-compact``: compact an upserted table (small files and position deletes rewritten).

Rewrites every partition that has ``--min-delete-files`` position delete files (default 1)
or at least ``--min-files`` data files below the target size, one ``replace`` snapshot per
partition (see :func:`icesink.compact`): the same planning and rewrite a sink runs after its
commits when ``maintenance.*`` says so, all at once here. Safe while a stream writes the
table: a partition a concurrent commit changed is left as it was and reported; run the job
again later. For example::

    icesink-compact --table analytics.orders \\
        --catalog-option type=sql --catalog-option uri=sqlite:////data/catalog.db \\
        --catalog-option warehouse=file:///data/warehouse --target-file-size-bytes 268435456
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging

from pyiceberg.catalog import load_catalog

from icesink import ConfigError, compact

DEFAULT_TARGET_FILE_SIZE_BYTES = 512 * 1024 * 1024


def parser() -> argparse.ArgumentParser:
    """The command line: the catalog, the table, the target size."""
    p = argparse.ArgumentParser(prog="icesink-compact", description=__doc__.split("\n\n")[0])
    p.add_argument("--table", required=True, help="the table, namespace.name")
    p.add_argument("--catalog-name", default="default", help="the catalog's name")
    p.add_argument(
        "--catalog-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a catalog property (type, uri, warehouse, s3.endpoint, ...), as for the sink's catalog.*",
    )
    p.add_argument("--target-file-size-bytes", type=int, default=DEFAULT_TARGET_FILE_SIZE_BYTES)
    p.add_argument("--min-files", type=int, default=2, help="small data files that make a partition worth it")
    p.add_argument(
        "--min-delete-files", type=int, default=1, help="delete files that make a partition worth it"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Compact the table and print what was done (one JSON line); exit code 1 if a partition was given up."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parser().parse_args(argv)
    properties: dict[str, str] = {}
    for item in args.catalog_option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--catalog-option {item!r} is not KEY=VALUE", hint="e.g. --catalog-option type=sql"
            )
        properties[key.strip()] = value
    name = properties.pop("name", args.catalog_name)  # as the sink's catalog.name
    table = load_catalog(name, **properties).load_table(args.table)
    report = compact(
        table,
        target_file_size_bytes=args.target_file_size_bytes,
        min_files=args.min_files,
        min_delete_files=args.min_delete_files,
    )
    print(json.dumps({"table": args.table, **dataclasses.asdict(report)}, default=str), flush=True)
    return 1 if report.given_up else 0


if __name__ == "__main__":
    raise SystemExit(main())
