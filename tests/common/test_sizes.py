"""One vocabulary for sizes: memory=, disk=, window_bytes=, cache_limit= and the CLI's --memory."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import datagen

from undertale_duck import ArgumentError, ParquetDataset
from undertale_duck.cli import main
from undertale_duck.common.sizes import parse_size

IEC = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
SI = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


@given(st.integers(0, 4096), st.sampled_from(sorted({**IEC, **SI}.items())))
def test_unit_strings_mean_what_they_say(number: int, unit: tuple[str, int]) -> None:
    name, scale = unit
    for text in (f"{number}{name}", f"{number} {name.lower()}", f" {number}{name.upper()} "):
        assert parse_size(text, "memory", "MiB") == number * scale
        assert parse_size(text, "cache_limit", "bytes") == number * scale


@given(st.floats(0, (1 << 30) - 1, allow_nan=False))
def test_numbers_are_read_in_the_arguments_unit(mib: float) -> None:
    assert parse_size(mib, "memory", "MiB") == int(mib * (1 << 20))
    assert parse_size(str(mib), "memory", "MiB") == int(mib * (1 << 20))


@given(st.integers(0, 1 << 61))
def test_byte_counts_stay_exact(count: int) -> None:
    assert parse_size(count, "window_bytes", "bytes") == count
    assert parse_size(str(count), "window_bytes", "bytes") == count


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (4e9, "surely a byte count"),
        (1 << 30, "surely a byte count"),
        ("4000000000", "surely a byte count"),
        (-1, ">= 0"),
        (math.nan, ">= 0"),
        (math.inf, ">= 0"),
        (True, "number of MiB"),
        (None, "number of MiB"),
        ([4096], "number of MiB"),
        ("4 parsecs", "such as '4GiB'"),
        ("", "such as '4GiB'"),
        ("GiB", "such as '4GiB'"),
        ("1e30GB", "too large"),
        ("-5GiB", "such as '4GiB'"),
        # beyond any float, and beyond 4 EiB even as bytes: no OverflowError on the way
        (10**400, "too large: 10000000... (401 digits)"),
        ("1e400", "too large"),
        (1e300, "too large"),
        (1 << 62, "too large"),
    ],
)
def test_nonsense_is_refused_naming_the_argument(value: object, fragment: str) -> None:
    with pytest.raises(ArgumentError, match="memory") as info:
        parse_size(value, "memory", "MiB")
    assert fragment in str(info.value)


@pytest.mark.parametrize("value", [10**400, "1e400", "9" * 500])
def test_sizes_beyond_any_float_are_argument_errors_on_every_front(
    tmp_path: Path, value: object
) -> None:
    datagen.write_shards(tmp_path / "d", [5])
    with pytest.raises(ArgumentError, match="memory is too large"):
        ParquetDataset(tmp_path / "d", memory=value)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="cache_limit is too large"):
        parse_size(value, "cache_limit", "bytes")


def test_a_byte_count_must_be_whole() -> None:
    with pytest.raises(ArgumentError, match="whole number of bytes"):
        parse_size(1.5, "cache_limit", "bytes")
    assert parse_size(2.0, "cache_limit", "bytes") == 2


def test_dataset_sizes(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path / "d", [50, 50])
    src = tmp_path / "d"
    ds = ParquetDataset(src, memory="2GiB", disk="1GiB", window_bytes="64KiB",
                        disk_dir=tmp_path / "tier")
    assert ds.memory_bytes == 2 << 30
    assert ds.memory == 2048
    assert ds.disk == 1024
    assert ds.window_bytes == 64 << 10
    assert ParquetDataset(src, memory="500MB").memory_bytes == 500_000_000
    assert ParquetDataset(src, 0.5).memory_bytes == 1 << 19  # the original API: MiB
    with pytest.raises(ArgumentError, match=r"memory=4000000000\.0 is read in MiB"):
        ParquetDataset(src, memory=4e9)
    with pytest.raises(ArgumentError, match="disk"):
        ParquetDataset(src, disk="lots")
    with pytest.raises(ArgumentError, match="window_bytes must be at least 1 byte"):
        ParquetDataset(src, window_bytes="0B")


def test_cli_memory_takes_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    datagen.write_shards(tmp_path / "d", [20])
    src = tmp_path / "d"
    assert main(["sql", str(src), "SELECT count(*) AS n FROM dataset", "--memory", "1GiB",
                 "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["n", "20"]
    with pytest.raises(SystemExit) as usage:
        main(["sql", str(src), "SELECT 1 AS n FROM dataset", "--memory", "1e30"])
    assert usage.value.code == 2
    err = capsys.readouterr().err
    assert "--memory" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [
    ["describe", "--scan"], ["validate", "--schema", "TokenizedDataset"],
    ["sql", "SELECT 1 AS n", "--where", "label >= 0"],
    ["pack", "--column", "tokens", "--length", "4"],
])
def test_cli_memory_of_a_pebibyte_or_more_is_a_usage_error_naming_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # '1PiB' reached ParquetDataset/describe as 2**30 MiB, which they refuse as "a byte count
    # by mistake" ("memory=1073741824.0 is read in MiB"), naming an argument never typed
    datagen.write_shards(tmp_path / "d", [20])
    args = [command[0], str(tmp_path / "d"), *command[1:]]
    with pytest.raises(SystemExit) as usage:
        main([*args, "--memory", "1PiB"])
    assert usage.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--memory" in err and "1PiB" in err, err
    assert "byte count" not in err and "Traceback" not in err, err
