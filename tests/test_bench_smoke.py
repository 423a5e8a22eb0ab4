from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.mark.heavy
def test_throughput_benchmark_runs(tmp_path: Path) -> None:
    import bench_throughput

    results = bench_throughput.main([
        "--shards", "2", "--rows", "600", "--batch", "64", "--seed-rows", "200",
        "--workers", "0,1", "--no-hf", "--data", str(tmp_path / "data"),
        "--out", str(tmp_path / "out"),
    ])
    assert results["entries"]
    assert all(math.isfinite(e["rate"]) and e["rate"] > 0 for e in results["entries"])
    assert all(math.isfinite(v) for v in results["ratios"].values())
    assert (tmp_path / "out" / "throughput.md").read_text().count("|") > 10
    assert all(p.stat().st_size > 0 for p in results["plots"])


@pytest.mark.heavy
def test_sizes_benchmark_runs(tmp_path: Path) -> None:
    import bench_sizes

    results = bench_sizes.main([
        "--sizes", "400,800", "--shards", "2", "--batch", "64", "--seed-rows", "100",
        "--memory", "2", "--memory-rows", "1200", "--data", str(tmp_path / "data"),
        "--out", str(tmp_path / "out"),
    ])
    assert len(results["sizes"]) == 2
    for entry in results["sizes"]:
        assert all(math.isfinite(entry[k]) and entry[k] > 0 for k in ("decode", "ours", "seed"))
    assert math.isfinite(results["over_mb"]) and results["memory"]["rows"] > 0
    assert all(p.stat().st_size > 0 for p in results["plots"])


@pytest.mark.heavy
def test_random_first_benchmark_runs(tmp_path: Path) -> None:
    import bench_random_first

    results = bench_random_first.main([
        "--shards", "2", "--shard-rows", "3000", "--rows", "640", "--rounds", "1",
        "--memory", "8", "--disk", "64", "--loaders", "ours",
        "--root", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
    ])
    run = results["runs"][0]["ours"]
    assert run["rows"] == 640 and run["disk"]["writes"] > 0  # every row of it checked
    assert (tmp_path / "out" / "random_first.md").read_text().count("|") > 10
    assert not list((tmp_path / "data").rglob("*.arrow"))  # no window file beside the data


@pytest.mark.heavy
def test_access_benchmark_runs(tmp_path: Path) -> None:
    import bench_access

    results = bench_access.main([
        "--shards", "2", "--rows", "600", "--row-group", "100", "--memory", "1",
        "--random-batches", "1", "--workers", "0,1", "--no-peers", "--repeat", "1",
        "--first-epochs", "2", "--small-epochs", "2", "--large-groups", "300",
        "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
    ])
    scenarios = {e["scenario"] for e in results["entries"]}
    assert {"random", "small batches", "first epoch", "first epoch, one row group per shard",
            "workers: torch transfer only (no decode)"} <= scenarios
    firsts = [e for e in results["entries"] if e["scenario"] == "first epoch"]
    assert {e["rows"] for e in firsts} == {2 * 2 * 600}  # two epochs per measurement
    assert all(math.isfinite(e["rate"]) and e["rate"] > 0 for e in results["entries"])
    assert math.isfinite(results["ratios"]["cached_batch64_vs_batch256"])
    assert results["memory"]["decoded"] == results["memory"]["windows"]
    assert (tmp_path / "out" / "access.md").read_text().count("|") > 20
    assert all(p.stat().st_size > 0 for p in results["plots"])
    assert not list((tmp_path / "data").rglob("*.arrow"))  # no window file beside the data


@pytest.mark.heavy
def test_small_batches_benchmark_runs(tmp_path: Path) -> None:
    import bench_small_batches

    results = bench_small_batches.main([
        "--shards", "2", "--rows", "600", "--row-group", "100", "--repeat", "2",
        "--epochs", "1", "--profile", "64", "--parts", "--data", str(tmp_path / "data"),
        "--out", str(tmp_path / "out"),
    ])
    assert {e["rows"] for e in results["entries"]} == {2 * 600}
    assert all(math.isfinite(e["rate"]) and e["rate"] > 0 for e in results["entries"])
    assert all(math.isfinite(v) and v > 0 for v in results["ratios"].values())
    loaders = {e["loader"].rsplit(",", 1)[0] for e in results["entries"]}
    assert loaders == {"undertale_duck cached", "undertale_duck ChunkedLoader", "pyarrow slices",
                       "DataLoader alone"}
    assert len(results["fits"]) == 4  # a + c * batch for each loader
    assert all(math.isfinite(v) for fit in results["fits"].values() for v in fit.values())
    assert "cumtime" in results["profile"]
    assert (tmp_path / "out" / "small_batches.md").read_text().count("|") > 10
    assert results["checked"] is False
    assert "rows not checked" in (tmp_path / "out" / "small_batches.md").read_text()
    timed = results["parts"]  # --parts: one timed epoch per round and batch size
    assert sorted(t["batch"] for t in timed) == [64, 64, 256, 256]
    for t in timed:
        assert t["fetch"] > 0 and t["collate"] > 0 and t["check"] == 0
        assert t["total"] >= t["fetch"] + t["collate"]
    assert "Where a cached `DataLoader` batch's time goes" in (
        tmp_path / "out" / "small_batches.md").read_text()


@pytest.mark.heavy
def test_small_batches_benchmark_checks_every_row_when_asked(tmp_path: Path) -> None:
    import bench_small_batches
    import torch

    from undertale_duck.core.rows import row_access

    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the check runs on one thread; the caller's count comes back
    try:
        results = bench_small_batches.main([
            "--shards", "2", "--rows", "600", "--row-group", "100", "--repeat", "1",
            "--epochs", "2", "--check", "--no-floor", "--ahead-ab", "--label", "checked",
            "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
        ])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert results["checked"] is True
    assert {e["rows"] for e in results["entries"]} == {2 * 2 * 600}  # two epochs, each checked
    loaders = {e["loader"].rsplit(",", 1)[0] for e in results["entries"]}
    assert loaders == {"undertale_duck cached", "undertale_duck cached, runs alone",
                       "undertale_duck ChunkedLoader", "pyarrow slices"}
    assert {k for k in results["ratios"] if k.startswith("runs sliced ahead / alone")} == {
        "runs sliced ahead / alone, batch 256 rows/s", "runs sliced ahead / alone, batch 64 rows/s"}
    assert row_access.SLICE_AHEAD  # the A/B leaves the dataset slicing ahead
    assert "every row checked" in (tmp_path / "out" / "small_batches_checked.md").read_text()


def test_the_benchmarks_stopwatch_counts_the_cpu_and_pages_of_a_pass() -> None:
    import time

    import common
    import numpy as np

    clock = common.Stopwatch()
    spent = time.thread_time()
    while time.thread_time() - spent < 0.05:  # CPU on this thread, however loaded the host
        pass
    block = np.ones(64 * 2**20, dtype=np.uint8)  # fresh pages: the kernel faults each in
    figures = clock.figures(1000)
    assert int(block.sum()) == 64 * 2**20
    assert figures["rows"] == 1000 and figures["rate"] == 1000 / figures["seconds"]
    assert figures["seconds"] >= 0.05
    assert figures["main_cpu_us_per_row"] >= 50.0  # 0.05 s over 1,000 rows
    assert figures["cpu_us_per_row"] >= 45.0  # rusage's own accounting of the same
    assert 0.0 <= figures["sys_us_per_row"] <= figures["cpu_us_per_row"]
    assert figures["minor_faults"] >= 32  # 64 MiB, even in 2 MiB pages
    # the block was faulted in by this (the main) thread: its own count holds them too
    assert 32 <= figures["main_minor_faults"] <= figures["minor_faults"]
    assert 0.0 <= figures["main_sys_us_per_row"] <= figures["main_cpu_us_per_row"]
    assert figures["peak_rss_mib"] >= 64 and figures["load"] >= 0.0


def test_python_format_benchmark_runs_and_checks_rows(tmp_path: Path) -> None:
    import bench_python_format

    results = bench_python_format.main([
        "--shards", "2", "--rows", "300", "--batch", "64", "--repeat", "1", "--check",
        "--thresholds", "700,100000", "--data", str(tmp_path / "data"),
        "--out", str(tmp_path / "out"),
    ])
    entries = results["entries"]
    assert [e["threshold"] for e in entries] == [700, 100000]
    assert all(e["rows"] == 600 and e["rate"] > 0 for e in entries)
    # a batch of 64 rows holds 192 containers: never 100,000 alive, so never a collection
    assert entries[1]["collections"] == 0
    import gc

    assert gc.get_threshold()[0] != 100000  # the user's threshold is put back
    assert "| 100000 |" in (tmp_path / "out" / "python_format.md").read_text()


def test_the_benchmarks_row_check_refuses_wrong_rows(tmp_path: Path) -> None:
    import common
    import torch

    from undertale_duck import ParquetDataset, collate, load

    directory = common.write_dataset(1, 300, root=tmp_path, row_group=100)
    ds = ParquetDataset(directory, format="torch")
    check = common.Checker()
    for batch in load(ds, None, collate, 64):
        check(batch)
    assert check.rows == 300
    good = next(iter(load(ds, None, collate, 64)))
    skipped = common.Checker()
    skipped.rows = 1  # expects rows 1..64: the labels are off by one
    with pytest.raises(AssertionError, match=r"wrong labels in rows 1\.\.64"):
        skipped(good)
    wrong = dict(good, mask=torch.zeros_like(good["mask"]))
    with pytest.raises(AssertionError, match=r"wrong masks in rows 0\.\.63"):
        common.Checker()(wrong)
    short = dict(good, id=good["id"][:-1])
    with pytest.raises(AssertionError, match=r"wrong shapes in rows 0\.\.63"):
        common.Checker()(short)
    ds.close()


@pytest.mark.heavy
def test_storage_benchmark_runs(tmp_path: Path) -> None:
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    import bench_storage

    results = bench_storage.main([
        "--shards", "2", "--rows", "400", "--row-group", "200", "--batch", "64",
        "--repeat", "1", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
    ])
    assert all(math.isfinite(v) and v > 0 for v in results["ratios"].values())
    assert all(math.isfinite(v) and v > 0 for v in results["epoch_ratios"].values())
    assert results["runs"][0]["cold"]["downloads"] == 2
    assert results["runs"][0]["warm"]["downloads"] == 0
    assert (tmp_path / "out" / "storage.md").read_text().count("|") > 10


@pytest.mark.heavy
def test_pack_peers_benchmark_runs(tmp_path: Path) -> None:
    import importlib.util

    import bench_pack_peers

    systems = ["packed", "rows"] + [
        s for s, module in (("litdata", "litdata"), ("hf", "datasets"))
        if importlib.util.find_spec(module) is not None
    ]
    results = bench_pack_peers.main([
        "--shards", "2", "--rows", "300", "--longest", "64", "--lengths", "32",
        "--batch", "4", "--repeat", "1", "--systems", ",".join(systems),
        "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
    ])
    (entry,) = results["entries"]
    for system in systems:
        assert entry[system]["checked"] is True, entry[system]
        assert math.isfinite(entry[system]["tokens_s"]) and entry[system]["tokens_s"] > 0
    assert (tmp_path / "out" / "pack_peers.json").exists()


@pytest.mark.heavy
def test_bare_decode_benchmark_runs(tmp_path: Path) -> None:
    import bench_bare_decode

    results = bench_bare_decode.main([
        "--shards", "2", "--shard-rows", "300", "--rounds", "2",
        "--decoders",
        "pyarrow-iter,pyarrow-iter-jemalloc,pyarrow-ours,pyarrow-groups,duckdb,lance",
        "--root", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
    ])
    assert set(results["runs"]) | set(results["skipped"]) == {
        "pyarrow-iter", "pyarrow-iter-jemalloc", "pyarrow-ours", "pyarrow-groups",
        "duckdb", "lance"}
    for found in results["runs"].values():
        assert len(found) == 2 and all(r["rows"] == 600 and r["rate"] > 0 for r in found)
    assert (tmp_path / "out" / "bare_decode.md").read_text().count("|") > 10


@pytest.mark.heavy
def test_ragged_benchmark_runs_and_its_check_refuses_wrong_rows(tmp_path: Path) -> None:
    import bench_ragged
    import numpy as np
    import torch

    results = bench_ragged.main([
        "--shards", "2", "--shard-rows", "700", "--rounds", "1",
        "--loaders", "pyarrow,ours,ours-load", "--root", str(tmp_path / "data"),
        "--out", str(tmp_path / "out"),
    ])
    (run,) = results["runs"]
    assert list(run) == ["pyarrow", "ours", "ours-load"]
    assert all(r["rows"] == 1400 for r in run.values())  # every row of the epoch checked
    assert (tmp_path / "out" / "ragged.md").read_text().count("|") > 20
    shuffled = bench_ragged.main([
        "--shards", "2", "--shard-rows", "700", "--rounds", "1", "--shuffle",
        "--loaders", "pyarrow,ours,ours-load", "--root", str(tmp_path / "data"),
        "--out", str(tmp_path / "out"), "--name", "ragged_shuffled",
    ])
    (run,) = shuffled["runs"]
    assert all(r["rows"] == 1400 for r in run.values())  # each row once, each checked
    assert "--shuffle" in (tmp_path / "out" / "ragged_shuffled.md").read_text()
    # the check itself: a right batch passes; a shifted, re-padded or altered one does not
    from undertale_duck import ParquetDataset, collate, load

    ds = ParquetDataset(tmp_path / "data" / "ragged-s2x700", format="torch")
    sums = bench_ragged.token_sums(1400)
    good = next(iter(load(ds, None, collate, 64)))
    bench_ragged.check(good, np.arange(64), sums)
    with pytest.raises(AssertionError, match="wrong ids"):
        bench_ragged.check(good, np.arange(1, 65), sums)
    with pytest.raises(AssertionError, match="wrong tokens"):
        bench_ragged.check(dict(good, tokens=good["tokens"] + good["tokens_mask"]),
                           np.arange(64), sums)
    padded = good["tokens"].masked_fill(~good["tokens_mask"], -1)
    with pytest.raises(AssertionError, match="padding"):
        bench_ragged.check(dict(good, tokens=padded), np.arange(64), sums)
    first = good["tokens"].clone()
    first[0, :2] = torch.flip(first[0, :2], [0])  # the same sum, two tokens swapped
    with pytest.raises(AssertionError, match="wrong tokens at row 0"):
        bench_ragged.check(dict(good, tokens=first), np.arange(64), sums)
    ds.close()


@pytest.mark.heavy
def test_shapes_benchmark_runs_and_its_check_refuses_wrong_rows(tmp_path: Path) -> None:
    import bench_shapes
    import common
    import numpy as np

    results = bench_shapes.main([
        "--shapes", "tiny shards,int64 tokens,scalars,text", "--scale", "0.004",
        "--rounds", "1", "--root", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
    ])
    assert list(results["runs"]) == ["tiny shards", "int64 tokens", "scalars", "text"]
    for rounds in results["runs"].values():
        (run,) = rounds
        assert set(run) == {"pyarrow", "ours", "ours-load"}
        rows = {r["rows"] for r in run.values()}
        assert len(rows) == 1 and rows.pop() > 0  # every loader read every row, checked
    assert (tmp_path / "out" / "shapes.md").read_text().count("| tiny shards |") == 3
    for shape, column in [("long rows", "tokens"), ("scalars", "f3"), ("text", "text")]:
        make = bench_shapes.SHAPES[shape][3]
        good = common.to_tensors(make(np.arange(100, 140, dtype=np.int64)))
        checker = bench_shapes.Check()
        checker.rows = 100
        checker(good)  # right rows pass
        assert checker.rows == 140
        value = good[column]
        flipped = value[::-1] if isinstance(value, list) else value.flip(0)
        for bad in ({"row": good["row"] + 1}, {column: flipped}):
            checker.rows = 100
            with pytest.raises(AssertionError):
                checker(dict(good, **bad))


@pytest.mark.heavy
def test_workers_benchmark_runs(tmp_path: Path) -> None:
    import bench_workers

    results = bench_workers.main([
        "--shards", "2", "--shard-rows", "400", "--workers", "1", "--rounds", "1",
        "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"),
    ])
    assert all(math.isfinite(r) and r > 0 for r in results["ratios"].values())
    assert len(results["ratios"]) == 4  # plain, load, floor, encoding
    assert all(run["rows"] == 800 for run in results["runs"])  # every row, each once
    assert (tmp_path / "out" / "workers.md").read_text().count("|") > 10
