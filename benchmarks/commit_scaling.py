"""Commit latency over a long stream of small batches, and the size of the metadata.

Commits ``--batches`` small micro-batches (one small data file each, written by the
sink's own writer) through the sink's Committer to a table created the way the sink
creates tables (manifest merging on, old metadata files deleted), with the documented
maintenance (``expire_snapshots``) every ``--expire-every`` batches, and reports the
median commit latency of the first and the last 100 commits and the metadata folder's
size. No Spark is involved: this measures the commit path alone.

    .venv/bin/python -m benchmarks.commit_scaling --batches 1000

``--compare`` measures commit paths against each other (``--paths``, the reference
last), alternating in the same run, each on its own table with the same history:
``new``, the committer's path (a snapshot built once from the metadata in hand, a
compare-and-swap on the SQL catalog); ``main``, the same snapshot committed through
pyiceberg's ``Table.refresh()`` and the catalog's ``commit_table`` (the metadata parsed
at each); ``transaction``, a pyiceberg transaction (:mod:`benchmarks._legacy_commit`);
``driver-encoded``, the committer's path given files whose write tasks did not encode
their manifest entries (as ``main`` and ``transaction`` are), so that it encodes them.
It reports commit p50/p95 with ``--kept`` snapshots kept (no expiry), and one commit of
each of ``--wide`` files (synthetic file entries: a commit never opens its data files)
on a table of ``--columns`` columns (``--partitioned``: each file in a partition of its own).

    .venv/bin/python -m benchmarks.commit_scaling --compare --kept 100,500,2000 --wide 4096,16384

``--catalog rest`` makes the comparison's tables in the Iceberg REST catalog of a
SeaweedFS started on loopback for the run (their files on its S3 API, in its table
bucket) instead of a SQLite catalog with a local warehouse; the server is stopped at
the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.transforms import BucketTransform

from benchmarks._legacy_commit import CatalogCommitter, TransactionCommitter
from benchmarks._synthetic_files import BUCKETS, _synthetic_files, _template_file, fill_history
from benchmarks._write_specs import table_write_spec
from icesink import CommitConfig, expire_snapshots
from icesink.catalog import CREATED_TABLE_PROPERTIES
from icesink.commit.committer import Committer
from icesink.commit.ledger import BatchRange
from icesink.jobs.local_servers.seaweedfs import SeaweedFS
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.task import DataTaskWriter


def run(batches: int, expire_every: int, root: Path) -> dict[str, object]:
    catalog = load_catalog(
        "bench", type="sql", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh"
    )
    catalog.create_namespace("bench")
    arrow_schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = catalog.create_table("bench.commits", schema=arrow_schema, properties=CREATED_TABLE_PROPERTIES)
    file_schema = iceberg_to_arrow_schema(table.schema())
    committer = Committer(table, "bench", CommitConfig())
    latencies = []
    for batch_id in range(batches):
        spec = table_write_spec(
            table,
            f"bench-b{batch_id}",
            target_file_size_bytes=1 << 20,
            row_group_size_bytes=1 << 20,
            memory_budget_bytes=64 << 20,
            partition_values_in_task=False,
        )
        ids = list(range(batch_id * 100, batch_id * 100 + 100))
        rows = pa.RecordBatch.from_arrays(
            [pa.array(ids), pa.array([str(i) for i in ids])], schema=file_schema
        )
        files = DataTaskWriter(spec, 0, 0).write_all(iter([rows]))
        start = time.perf_counter()
        committer.commit(files, BatchRange(batch_id, batch_id), {batch_id: f"a{batch_id}"})
        latencies.append(time.perf_counter() - start)
        if expire_every and (batch_id + 1) % expire_every == 0:
            expire_snapshots(committer.table, retain_last=10)
    metadata = root / "wh" / "bench" / "commits" / "metadata"
    files_in_metadata = list(metadata.rglob("*"))
    table = catalog.load_table("bench.commits")
    first, last = latencies[:100], latencies[-100:]
    return {
        "batches": batches,
        "expire_every": expire_every,
        "first_100_median_ms": round(statistics.median(first) * 1000, 1),
        "last_100_median_ms": round(statistics.median(last) * 1000, 1),
        "ratio_last_to_first": round(statistics.median(last) / statistics.median(first), 2),
        "metadata_files": len([p for p in files_in_metadata if p.is_file()]),
        "metadata_bytes": sum(p.stat().st_size for p in files_in_metadata if p.is_file()),
        "snapshots": len(table.snapshots()),
        "manifests_in_current_snapshot": len(table.current_snapshot().manifests(table.io)),  # type: ignore[union-attr]
        "rows": table.scan().to_arrow().num_rows,
    }


def _quantiles_ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 1), "p95_ms": round(p95 * 1000, 1)}


PATHS = {
    "transaction": TransactionCommitter,
    "main": CatalogCommitter,
    "new": Committer,
    "driver-encoded": Committer,
}
# Paths whose messages carry no encoded manifest entries: the committer encodes them all.
DRIVER_ENCODED = {"transaction", "main", "driver-encoded"}
CATALOGS = ("sql", "rest")


@contextlib.contextmanager
def rest_catalog(root: Path) -> Iterator[dict[str, str]]:
    """SeaweedFS on loopback for the ``with`` block: the properties of its REST catalog (tables on its S3)."""
    (root / "seaweedfs").mkdir(parents=True)
    server = SeaweedFS(root / "seaweedfs")
    try:
        server.start()
        yield server.rest_catalog_properties()
    finally:
        server.stop()


class _Comparison:
    """One table per commit path, each filled with the same history, committing batch after batch.

    Each path has its own table: on a shared one every commit would find the table moved
    by the other path, which a single writer never does.
    """

    def __init__(
        self,
        root: Path,
        paths: list[str],
        rest: dict[str, str] | None = None,
        columns: int = 2,
        partitioned: bool = False,
    ) -> None:
        root.mkdir(parents=True)
        catalog: Catalog
        if rest is None:
            catalog = load_catalog(
                "bench", type="sql", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh"
            )
            namespace = "bench"
        else:  # one server for the whole run: a namespace per comparison
            catalog = load_catalog("bench", **rest)
            namespace = f"bench_{os.getpid()}_{root.name.replace('-', '_')}"
        catalog.create_namespace(namespace)
        doubles = [(f"d{c}", pa.float64()) for c in range(columns - 2)]
        schema = pa.schema([("id", pa.int64()), ("v", pa.string()), *doubles])
        self.committers: dict[str, Committer] = {}
        for path in paths:
            table = catalog.create_table(
                f"{namespace}.{path}", schema=schema, properties=CREATED_TABLE_PROPERTIES
            )
            if partitioned:
                with table.update_spec() as spec:
                    spec.add_field("id", BucketTransform(BUCKETS), "id_bucket")
            self.committers[path] = PATHS[path](table, "bench", CommitConfig())
        self.template = _template_file(table, root)
        self.batch_id = 0

    def commit(self, committer: Committer, files: int = 1, encode: bool = True) -> float:
        batch_id, self.batch_id = self.batch_id, self.batch_id + 1
        messages = _synthetic_files(committer.table, self.template, files, f"b{batch_id}", encode)
        start = time.perf_counter()
        committer.commit(messages, BatchRange(batch_id, batch_id), {batch_id: f"a{batch_id}"})
        return time.perf_counter() - start

    def fill(self, target: int, per_call: int = 100) -> None:
        """Add one-file append snapshots until every table keeps ``target`` (:func:`fill_history`)."""
        for committer in self.committers.values():
            fill_history(committer.table, self.template, target, per_call)

    def timings(self, samples: int, files: int = 1) -> dict[str, list[float]]:
        """``samples`` commits of ``files`` files per path, the paths taking turns."""
        timings: dict[str, list[float]] = {path: [] for path in self.committers}
        for _ in range(samples):
            for path, committer in self.committers.items():
                timings[path].append(self.commit(committer, files, path not in DRIVER_ENCODED))
        return timings


def compare(
    kept: list[int],
    wide: list[int],
    samples: int,
    rounds: int,
    root: Path,
    paths: list[str],
    rest: dict[str, str] | None = None,
    columns: int = 2,
    partitioned: bool = False,
) -> dict[str, object]:
    """The ``paths`` against each other, alternating: commits with ``kept`` snapshots, and of ``wide`` files.

    Ratios are of each path's p50 (median) to the last path's. ``rest``: the properties
    of the REST catalog to make the tables in (a SQLite catalog otherwise).
    """
    bench = _Comparison(root / "history", paths, rest)
    history = []
    for target in kept:
        bench.fill(target)
        timings = bench.timings(samples)
        quantiles = {path: _quantiles_ms(times) for path, times in timings.items()}
        last = quantiles[paths[-1]]["p50_ms"]
        ratios = {f"{path}/{paths[-1]}": round(q["p50_ms"] / last, 1) for path, q in quantiles.items()}
        history.append({"snapshots_kept": target, **quantiles, "ratio_p50": ratios})
        print(json.dumps(history[-1]), flush=True)
    wide_results = []
    for count in wide:
        bench = _Comparison(root / f"wide-{count}", paths, rest, columns, partitioned)
        bench.timings(10)
        timings = bench.timings(rounds, count)
        medians = {path: round(statistics.median(t) * 1000, 1) for path, t in timings.items()}
        last = medians[paths[-1]]
        ratios = {f"{path}/{paths[-1]}": round(ms / last, 1) for path, ms in medians.items()}
        wide_results.append({"files": count, "median_ms": medians, "ratio": ratios})
        print(json.dumps(wide_results[-1]), flush=True)
    return {
        "samples": samples,
        "rounds": rounds,
        "columns": columns,
        "partitioned": partitioned,
        "history": history,
        "wide": wide_results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--expire-every", type=int, default=100, help="0: never expire snapshots")
    parser.add_argument("--compare", action="store_true", help="old against new commit path")
    parser.add_argument("--kept", default="100,500,2000", help="snapshot counts to measure at (--compare)")
    parser.add_argument("--wide", default="4096,16384", help="files per wide commit (--compare)")
    parser.add_argument("--samples", type=int, default=20, help="commits per path at each --kept point")
    parser.add_argument("--rounds", type=int, default=3, help="wide commits per path")
    parser.add_argument("--columns", type=int, default=2, help="table columns in the wide commits (>= 2)")
    parser.add_argument(
        "--partitioned", action="store_true", help=f"wide commits' tables in bucket[{BUCKETS}] of id"
    )
    parser.add_argument(
        "--paths",
        default="main,new",
        help=f"commit paths to compare, the reference last (of {', '.join(PATHS)})",
    )
    parser.add_argument("--catalog", choices=CATALOGS, default="sql", help="the tables' catalog (--compare)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="icesink-commits-") as tmp:
        if args.compare:
            kept = [int(n) for n in args.kept.split(",") if n]
            wide = [int(n) for n in args.wide.split(",") if n]
            paths = [p for p in args.paths.split(",") if p]
            with contextlib.ExitStack() as stack:
                rest = stack.enter_context(rest_catalog(Path(tmp))) if args.catalog == "rest" else None
                result = compare(
                    kept,
                    wide,
                    args.samples,
                    args.rounds,
                    Path(tmp),
                    paths,
                    rest,
                    args.columns,
                    args.partitioned,
                )
            result = {"catalog": args.catalog, **result}
        else:
            result = run(args.batches, args.expire_every, Path(tmp))
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
