"""The peers benchmark's contenders, rounds and ratios (no Spark: runs as the children write them)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks._peers_report import markdown
from benchmarks._peers_summary import Contender, goals, parse_contenders, round_order, summarize


def _run(name: str, round_no: int, rows_per_s: float, files: int = 640, read: float = 1e6) -> dict[str, Any]:
    sizes = {"count": files, "min": 1000 + round_no, "median": 2000 + round_no, "max": 3000}
    return {
        "contender": name, "round": round_no, "ok": True, "rows_per_s": rows_per_s, "files": sizes,
        "read_rows_per_s": read, "spark": "4.1.1" if "@" not in name else "4.2.0", "load": 2.0,
    }  # fmt: skip


def test_each_runtime_gets_its_reference_and_iceberg_runs_only_on_its_own_spark() -> None:
    parsed = parse_contenders("icesink-bucket, iceberg-hash,icesink-none@project,icesink-bucket")
    assert [c.name for c in parsed] == [
        "icesink-bucket", "iceberg-hash", "icesink-none@project", "parquet", "parquet@project",
    ]  # fmt: skip
    assert parsed[2].reference == Contender("parquet", "project")
    for bad in ("iceberg-hash@project", "icesink-hash", "parquet@2.0"):
        with pytest.raises(ValueError, match=bad.split("@")[-1]):
            parse_contenders(bad)


def test_each_round_starts_with_the_next_contender() -> None:
    names = parse_contenders("icesink-bucket,iceberg-none,parquet")
    orders = [[c.writer for c in round_order(names, n)] for n in range(4)]
    assert orders == [
        ["icesink-bucket", "iceberg-none", "parquet"],
        ["iceberg-none", "parquet", "icesink-bucket"],
        ["parquet", "icesink-bucket", "iceberg-none"],
        ["icesink-bucket", "iceberg-none", "parquet"],
    ]


def test_ratios_are_to_the_reference_of_the_same_round_and_spark_and_failures_are_kept() -> None:
    contenders = parse_contenders("icesink-bucket,iceberg-range,icesink-bucket@project")
    runs = [
        _run("icesink-bucket", 0, 300, read=3e6), _run("parquet", 0, 100, read=2e6),
        _run("icesink-bucket", 1, 200, read=2e6), _run("parquet", 1, 50, read=1e6),
        _run("icesink-bucket", 2, 900),  # its reference failed in round 2: no ratio
        {"contender": "parquet", "round": 2, "ok": False, "error": "OutOfMemoryError", "load": 9.0},
        {"contender": "iceberg-range", "round": 0, "ok": False, "error": "IllegalStateException", "load": 2},
        _run("icesink-bucket@project", 0, 400), _run("parquet@project", 0, 200),
    ]  # fmt: skip
    by_name = {s["contender"]: s for s in summarize(runs, contenders)}
    mine = by_name["icesink-bucket"]
    assert (mine["ratios"], mine["ratio"], mine["median_rows_per_s"]) == ([3.0, 4.0], 3.5, 300)
    assert (mine["read_ratios"], mine["read_ratio"]) == ([1.5, 2.0], 1.75)
    assert (mine["median_file_bytes"], mine["min_file_bytes"], mine["spark"]) == (2001, 1000, ["4.1.1"])
    assert by_name["icesink-bucket@project"]["ratios"] == [2.0]
    assert (by_name["parquet"]["failed"], by_name["parquet"]["rounds"]) == (1, 2)
    failed = by_name["iceberg-range"]
    assert (failed["rounds"], failed["error"], failed["ratio"]) == (0, "IllegalStateException", None)
    config = {"contenders": [c.name for c in contenders], "rounds": 3, "batches": 10, "rows_per_batch": 10**6}
    text = markdown({"config": config, "load_average_start": [1.0], "runs": runs})
    assert "| iceberg-range | - | failed: IllegalStateException |" in text
    assert "| icesink-bucket | 4.1.1 | 300 | 3.50 (3.00, 4.00) |" in text


def test_icesink_is_set_against_each_iceberg_sink_of_its_spark_round_by_round() -> None:
    contenders = parse_contenders("icesink-none,iceberg-none,iceberg-hash,icesink-none@project")
    runs = [
        _run("icesink-none", 0, 300, files=640), _run("iceberg-none", 0, 100, files=640),
        _run("icesink-none", 1, 200, files=640), _run("iceberg-none", 1, 150, files=1280),
        _run("iceberg-hash", 1, 50), _run("icesink-none@project", 1, 999),
    ]  # fmt: skip
    found = goals(runs, contenders)
    assert [(g["icesink"], g["iceberg"], g["ratios"]) for g in found] == [
        ("icesink-none", "iceberg-none", [3.0, 1.333]),
        ("icesink-none", "iceberg-hash", [4.0]),
    ]
    assert (found[0]["files"], found[0]["peer_files"]) == ([640, 640], [640, 1280])
