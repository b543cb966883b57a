"""What a written file's message costs: its size, and the task's encoding and the driver's decoding.

::

    .venv/bin/python -m benchmarks.file_messages --files 16384 --columns 19

Messages of ``--files`` synthetic files (``benchmarks.commit_scaling``'s: entries copied
from one real file of ``--columns`` columns, each in a partition of its own), in two
kinds: with the file's statistics in the message (as the committer encodes the entries
itself), and with the manifest entry a write task encodes instead
(:mod:`icesink.write.manifest_entry`). For each: the JSON bytes per file, the bytes a
decoded message holds (``tracemalloc`` over ``--sample`` messages), and the median of
``--repeats`` decodings of all of them (``WriteResult.from_json``, what the driver does
with a write job's output). And the task's cost of encoding one entry.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from benchmarks._synthetic_files import _synthetic_files
from benchmarks.commit_scaling import _Comparison
from icesink.write.manifest_entry import EntryEncoding, manifest_codec, sync_marker
from icesink.write.messages import DataFileMessage, WriteResult


def measure(files: int, columns: int, repeats: int, sample: int, root: Path) -> dict[str, object]:
    bench = _Comparison(root, ["new"], columns=columns, partitioned=True)
    table = bench.committers["new"].table
    result: dict[str, object] = {"files": files, "columns": columns}
    for kind, encode in (("statistics", False), ("entry", True)):
        texts = [m.to_json() for m in _synthetic_files(table, bench.template, files, kind, encode)]
        decode_s = []
        for _ in range(repeats):
            start = time.perf_counter()
            WriteResult.from_json(texts)
            decode_s.append(time.perf_counter() - start)
        tracemalloc.start()
        kept = [DataFileMessage.from_json(t) for t in texts[:sample]]
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        result[kind] = {
            "json_bytes_per_file": round(sum(map(len, texts)) / len(texts)),
            "object_bytes_per_file": round(held / len(kept)),
            "decode_ms": round(statistics.median(decode_s) * 1000, 1),
        }
        print(json.dumps({kind: result[kind]}), flush=True)
    plain = _synthetic_files(table, bench.template, sample, "plain", encode=False)
    codec = manifest_codec(table.metadata.properties)
    encoding = EntryEncoding(table.spec(), table.schema(), codec, sync_marker("plain"))
    encoding.with_entry(plain[0])  # the writer built once
    encode_s = []
    for _ in range(repeats):
        start = time.perf_counter()
        for message in plain:
            encoding.with_entry(message)
        encode_s.append((time.perf_counter() - start) / len(plain))
    result["task_encode_us_per_file"] = round(statistics.median(encode_s) * 1e6, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=16384)
    parser.add_argument("--columns", type=int, default=19)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sample", type=int, default=4000, help="messages measured by tracemalloc")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="icesink-messages-") as tmp:
        result = measure(args.files, args.columns, args.repeats, args.sample, Path(tmp) / "t")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
