"""Commit latency over a long stream of small batches, and the size of the metadata.

Commits ``--batches`` small micro-batches (one small data file each, written by the
sink's own writer) through the sink's Committer to a table created the way the sink
creates tables (manifest merging on, old metadata files deleted), with the documented
maintenance (``expire_snapshots``) every ``--expire-every`` batches, and reports the
median commit latency of the first and the last 100 commits and the metadata folder's
size. No Spark is involved: this measures the commit path alone.

    .venv/bin/python -m benchmarks.commit_scaling --batches 1000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog import load_catalog

from icesink import CommitConfig, expire_snapshots
from sink.catalog import CREATED_TABLE_PROPERTIES
from sink.commit.committer import Committer
from sink.commit.ledger import BatchRange
from sink.type_mapping import iceberg_to_arrow_schema
from sink.write.task import DataTaskWriter, WriteSpec


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
        spec = WriteSpec(
            table="bench.commits",
            schema=table.schema(),
            partition_spec=table.spec(),
            data_location=f"{table.location()}/data",
            io_properties=dict(table.io.properties),
            table_properties=dict(table.metadata.properties),
            file_prefix=f"bench-b{batch_id}",
            target_file_size_bytes=1 << 20,
            row_group_size_bytes=1 << 20,
            memory_budget_bytes=64 << 20,
            compression="zstd",
            num_data_columns=2,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--expire-every", type=int, default=100, help="0: never expire snapshots")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="icesink-commits-") as tmp:
        print(json.dumps(run(args.batches, args.expire_every, Path(tmp)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
