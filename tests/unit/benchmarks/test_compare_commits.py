"""The same-run A/B of two commits: its rounds' order, the benchmarks' figures, the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks._ab_benchmarks import Benchmark, last_json_line, routing_figures, run_figures
from benchmarks._ab_summary import Run, figure_rows, markdown
from benchmarks.compare_commits import _arguments, round_contenders, round_order
from benchmarks.compare_commits import _run as run_process

A, B = "a" * 40, "b" * 40


def _run(commit: str, round_no: int, position: int, **figures: float) -> Run:
    return Run(commit, round_no, position, figures, 1.0, 60.0, f"/ab/{commit[:12]}/sink/__init__.py")


def test_rotate_runs_b_first_every_other_round_and_starts_with_the_next_contender() -> None:
    assert [round_order(A, B, n, rotate=False) for n in (1, 2, 3)] == [(A, B)] * 3
    assert [round_order(A, B, n, rotate=True) for n in (1, 2, 3)] == [(A, B), (B, A), (A, B)]
    names = ("icesink-bucket", "icesink-none", "parquet")
    assert round_contenders(names, 2, rotate=False) == "icesink-bucket,icesink-none,parquet"
    assert round_contenders(names, 2, rotate=True) == "icesink-none,parquet,icesink-bucket"
    assert round_contenders(names, 4, rotate=True) == "icesink-bucket,icesink-none,parquet"
    assert round_contenders((), 2, rotate=True) == ""


def test_unknown_arguments_and_all_after_the_separator_go_to_the_benchmark() -> None:
    args, passed = _arguments(
        [A, B, "--benchmark", "routing", "--rounds", "2", "--topics", "200", "--", "--rounds", "1"]
    )
    assert (args.benchmark, args.rounds) == ("routing", 2)
    assert passed == ["--topics", "200", "--rounds", "1"]
    with pytest.raises(SystemExit):
        _arguments([A, B, "--benchmark", "upsert", "--contenders", "single"])


def test_figures_of_the_reference_workload_and_of_routing(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    summary = [
        {"contender": "icesink-none", "median_rows_per_s": 500_000, "ratio_to_parquet": 0.8},
        {"contender": "parquet", "median_rows_per_s": 625_000, "ratio_to_parquet": 1.0},
    ]
    out.write_text(json.dumps({"summary": summary}))
    assert run_figures(out, "") == {
        "icesink-none rows/s": 500_000,
        "icesink-none x parquet": 0.8,
        "parquet rows/s": 625_000,
    }
    result = {
        "median_messages_per_s": {"single": 50_000, "routed": 20_000},
        "ratios": {"routed": [0.38, 0.42, 0.41]},
        "ratios_after_first_batch": {"routed": [0.5, 0.6]},
        "runs": [
            {"kind": "single", "messages": 100, "cpu_seconds": 4, "after_first_rate": 60_000},
            {"kind": "single", "messages": 100, "cpu_seconds": 5, "after_first_rate": 70_000},
            {"kind": "routed", "messages": 100, "cpu_seconds": 10, "after_first_rate": None},
        ],
    }
    printed = (
        "produced ...\n{not the result\n" + json.dumps({"old": 1}) + "\nmedian: ...\n" + json.dumps(result)
    )
    assert routing_figures(tmp_path / "none.json", printed + "\ncompare_commits: sink /x\n") == {
        "single msg/s": 50_000,
        "single msg per CPU s": 22.5,
        "single msg/s after batch 1": 65_000,
        "routed msg/s": 20_000,
        "routed msg per CPU s": 10,
        "routed / single": 0.41,
        "routed / single after batch 1": 0.55,
    }
    with pytest.raises(SystemExit, match="no JSON line"):
        last_json_line("median: ...\n")


def test_summary_takes_b_over_a_round_by_round_whatever_ran_first() -> None:
    runs = [
        _run(A, 1, 1, rate=100.0, cpu=10.0),
        _run(B, 1, 2, rate=110.0, cpu=10.0),
        _run(B, 2, 1, rate=45.0, cpu=9.0),  # a loaded round: both slow, the ratio holds
        _run(A, 2, 2, rate=50.0, cpu=12.0),
        _run(A, 3, 1, rate=90.0, cpu=8.0, only_a=1.0),
        _run(B, 3, 2, rate=81.0, cpu=10.0),
    ]
    rows = {row.name: row for row in figure_rows(A, B, runs)}
    assert list(rows) == ["rate", "cpu", "only_a"]
    assert rows["rate"].base == [100.0, 50.0, 90.0]
    assert rows["rate"].head == [110.0, 45.0, 81.0]
    assert [round(x, 3) for x in rows["rate"].ratios] == [1.1, 0.9, 0.9]
    assert rows["rate"].as_dict()["median_ratio"] == pytest.approx(0.9)
    assert rows["rate"].as_dict()["median_base"] == 90.0
    assert (rows["only_a"].head, rows["only_a"].ratios, rows["only_a"].as_dict()["median_ratio"]) == (
        [],
        [],
        None,
    )
    table = markdown(A, B, runs)
    assert "| rate | 90 | 81 | 0.900 | 1.100, 0.900, 0.900 | 100, 50, 90 | 110, 45, 81 |" in table
    assert "| only_a | 1 | - | - |  | 1 |  |" in table
    assert "| 2 | 1 | B bbbbbbb | 1.0 | 60 | /ab/bbbbbbbbbbbb/sink/__init__.py |" in table


def _tree(root: Path, imports_sink: bool) -> Path:
    """A checkout of one module that prints a JSON line, with an ``icesink.sink`` module of its own."""
    (root / "icesink").mkdir(parents=True)
    (root / "icesink" / "__init__.py").write_text("")
    (root / "icesink" / "sink.py").write_text("")
    body = "import json, sys\n" + ("import icesink.sink\n" if imports_sink else "")
    (root / "ab_probe.py").write_text(body + "print(json.dumps({'args': sys.argv[1:], 'x': 2}))\n")
    return root


def test_each_run_is_a_fresh_process_of_its_checkout_and_names_the_sink_it_imported(tmp_path: Path) -> None:
    def figures(out: Path, printed: str) -> dict[str, float]:
        result = last_json_line(printed)
        return {"x": float(result["x"]), "args": float(len(result["args"]))}

    probe = Benchmark("ab_probe", (), lambda contenders, out, workdir: ["--out", str(out)], figures)
    tree = _tree(tmp_path / "a", imports_sink=True)
    run = run_process(probe, tree, A, 2, 1, "", ["--rows", "10"], tmp_path / "ab")
    assert (run.commit, run.round, run.position, run.figures) == (A, 2, 1, {"x": 2.0, "args": 4.0})
    assert run.sink_file == str(tree / "icesink" / "sink.py")
    assert not (tmp_path / "ab" / "tmp" / f"ab_probe-{A[:12]}-2").exists()  # its TMPDIR, removed
    elsewhere = _tree(tmp_path / "b", imports_sink=False)
    with pytest.raises(SystemExit, match="ran the sink of None"):
        run_process(probe, elsewhere, B, 1, 1, "", [], tmp_path / "ab")
