"""The decode-floor benchmark runs end to end on a small shard (each measurement a process)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.mark.heavy
def test_decode_floor_benchmark_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_decode_floor
    import common

    monkeypatch.setattr(common, "DATA", tmp_path / "data")
    results = bench_decode_floor.main([
        "--rows", "3000", "--rounds", "1", "--scenarios", "one group,batch",
        "--out", str(tmp_path / "out"),
    ])
    runs = results["runs"]
    for case in ("one group, warm page cache", "one group, cold page cache"):
        (run,) = runs[case]
        assert run["pyarrow"]["rows"] == 3000  # every row checked, by both
        for name in ("ours memory=256", "ours memory=4096"):
            assert run[name]["rows"] == 3000
            assert run[name]["decodes"]["streams"] <= 1  # one group: decoded once at most
        for r in run.values():  # the main thread's CPU is a part of the process's
            assert 0 < r["main_cpu_us_per_row"] <= r["cpu_us_per_row"] + 0.01, case
    for case, names in (
        ("warm cache, batch 64 vs 256", ("ours batch 256", "ours batch 64")),
        ("warm cache, batch 64 vs 256, load()", ("ours-load batch 256", "ours-load batch 64")),
    ):
        (run,) = runs[case]
        assert list(run) == list(names)  # batch 256 first: the base of the ratio
        assert all(r["rows"] == 3000 for r in run.values())  # every row checked, in order
    assert (tmp_path / "out" / "decode_floor.md").read_text().count("|") > 20


@pytest.mark.heavy
def test_decode_floor_sharded_scenario_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench_decode_floor
    import common

    monkeypatch.setattr(common, "DATA", tmp_path / "data")
    results = bench_decode_floor.main([
        "--scenarios", "sharded", "--shards", "2", "--shard-rows", "300", "--rounds", "1",
        "--loaders", "pyarrow-views,ours,ours-load,ours-disk", "--name", "sharded",
        "--out", str(tmp_path / "out"),
    ])
    assert list(results["runs"]) == results["sharded"]["cases"]
    # cold, warm, second, shuffled, and cold with the peers' conversions untimed
    assert len(results["runs"]) == 5
    for case, (run,) in results["runs"].items():
        # pyarrow is the base of each ratio; the strictest floor checked like the others
        assert list(run) == ["pyarrow", "pyarrow-views", "ours", "ours-load", "ours-disk"], case
        assert all(r["rows"] == 600 for r in run.values())  # every row checked, once
        assert run["ours"]["cache_held_mib"] >= 0
        assert run["ours-disk"]["cache_held_mib"] == 0  # its windows are files, not memory
        # the disk tier's files were written before the clock (by another process) in the
        # converted row: nothing decoded; in the others the timed process writes them
        converted = "conversion done untimed" in case
        assert (run["ours-disk"]["disk_writes"] == 0) is converted, case
        assert "disk_writes" not in run["ours-load"]
        for r in run.values():  # the main thread's CPU is a part of the process's
            assert 0 < r["main_cpu_us_per_row"] <= r["cpu_us_per_row"] + 0.01, case
    assert (tmp_path / "out" / "sharded.md").read_text().count("|") > 20
    assert not [p for p in (tmp_path / "data").iterdir() if p.name.startswith("decode-floor-")]


@pytest.mark.heavy
def test_a_peers_conversion_is_left_out_of_the_converted_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench_decode_floor
    import common

    peers = [p for p in ("lance", "hf") if bench_decode_floor.peer_available(p)]
    if not peers:
        pytest.skip("no peer installed (the bench extra)")
    monkeypatch.setattr(common, "DATA", tmp_path / "data")
    results = bench_decode_floor.main([
        "--scenarios", "sharded", "--shards", "2", "--shard-rows", "300", "--rounds", "1",
        "--loaders", peers[0], "--modes", "converted", "--name", "converted",
        "--out", str(tmp_path / "out"),
    ])
    (case,) = results["runs"]
    assert "conversion done untimed" in case
    ((run,),) = results["runs"].values()
    assert list(run) == ["pyarrow", peers[0]]
    assert all(r["rows"] == 600 for r in run.values())  # every row checked, once


@pytest.mark.heavy
@pytest.mark.parametrize("peer", ["lance", "hf", "ours-disk"])
def test_a_copy_converted_by_another_process_is_opened_not_converted_again(
    tmp_path: Path, peer: str,
) -> None:
    import bench_decode_floor
    import common

    if not bench_decode_floor.peer_available(peer):
        pytest.skip(f"{peer} not installed (the bench extra)")
    directory = common.write_dataset(2, 300, root=tmp_path / "data")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    bench_decode_floor.convert_in_child(peer, directory, scratch)

    def converted() -> dict[Path, tuple[int, int]]:
        # inode and size: a rewrite makes new files (the disk tier touches its files' times
        # when it serves them, so times would not tell)
        return {p: (p.stat().st_ino, p.stat().st_size) for p in scratch.rglob("*")
                if p.is_file() and p.suffix in (".lance", ".arrow")}

    written = converted()
    assert written, "the other process wrote no converted copy"
    state: dict[str, Any] = {}
    epoch = bench_decode_floor.sharded_epochs(peer, directory, 64, None, scratch, state)
    check = bench_decode_floor.IdChecker(600)
    for batch in epoch(False):
        check(batch)
    if "ds" in state:  # ours-disk: every window mapped from its file, none decoded
        assert state["ds"].disk_stats.writes == 0
        state["ds"].close()
    assert check.rows == 600 and check.seen.all()
    assert converted() == written  # opened as the other process left it, not written again
