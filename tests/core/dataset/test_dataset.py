from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from support import datagen

from undertale_duck import (
    ArgumentError,
    ColumnError,
    ParquetDataset,
    QueryError,
    ReadOnlyError,
)


def test_sequential_access_equals_pyarrow(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root)
    assert len(ds) == total
    expected = datagen.expected(total)
    assert [ds[i] for i in range(total)] == expected
    # pyarrow reading the same files agrees, row for row
    assert pq.read_table(ds.shards).to_pylist() == expected


def test_random_access_and_negative_indices(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root, memory=1)
    expected = datagen.expected(total)
    rng = random.Random(7)
    for _ in range(300):
        i = rng.randrange(-total, total)
        assert ds[i] == expected[i]


def test_index_types(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root)
    assert ds[np.int64(5)] == datagen.row(5) | {"category": datagen.row(5)["category"]}
    assert ds[torch.tensor(6)]["id"] == "row-00000006"
    with pytest.raises(IndexError):
        ds[total]
    with pytest.raises(IndexError):
        ds[-total - 1]
    for bad in (1.0, "1", None, True, slice(0, 2)):
        with pytest.raises(TypeError):
            ds[bad]  # type: ignore[index]


def test_getitems_reads_each_window_once(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root)
    expected = datagen.expected(total)
    indices = [total - 1, 0, 3, 0, -2, 151, 200, 3]
    assert ds.__getitems__(indices) == [expected[i] for i in indices]
    stats = ds.cache_stats
    touched = {ds.windows.index(w) for w in ds.windows for i in indices
               if w.offset <= i % total < w.end}
    assert stats.misses == len(touched)



@pytest.mark.parametrize("fmt", ["python", "numpy", "torch"])
def test_getitems_names_the_shape_of_indices_that_are_not_1d(
    uneven: tuple[Path, int], fmt: str
) -> None:
    root, total = uneven
    ds = ParquetDataset(root, format=fmt)  # type: ignore[arg-type]
    shaped = "indices must be a 1-d sequence of integers"
    for bad, shape in (
        (np.arange(4).reshape(2, 2), r"\(2, 2\)"),
        (torch.arange(4).reshape(2, 2), r"\(2, 2\)"),
        (np.array(3), r"\(\)"),
        (torch.tensor(3), r"\(\)"),
        ([[0, 1], [2]], "numpy cannot read as 1-d"),
    ):
        with pytest.raises(TypeError, match=rf"__getitems__: {shaped}.*{shape}"):
            ds.__getitems__(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="__getitems__: indices is a tensor on the meta device"):
        ds.__getitems__(torch.arange(3, device="meta"))  # type: ignore[arg-type]
    # an array element that is itself an array is not an index either: our TypeError
    with pytest.raises(TypeError, match=r"dataset indices must be integers, not ndarray"):
        ds[np.arange(2)]  # type: ignore[index]
    with pytest.raises(TypeError, match=r"dataset indices must be integers, not Tensor"):
        ds[torch.tensor(1.0)]  # type: ignore[index]
    with pytest.raises(TypeError, match=r"not Tensor of shape \(\), dtype torch.int64 on the meta"):
        ds[torch.tensor(1, device="meta")]  # type: ignore[index]
    # torch gives a bool tensor and a one-element tensor __index__; numpy gives neither
    for bad, shown in ((torch.tensor(True), r"\(\), dtype torch.bool"),
                       (torch.tensor([7]), r"\(1,\), dtype torch.int64"),
                       (torch.tensor([[7]]), r"\(1, 1\), dtype torch.int64")):
        with pytest.raises(TypeError, match=rf"dataset indices must be integers, not Tensor "
                                            rf"of shape {shown}"):
            ds[bad]  # type: ignore[index]
    with pytest.raises(TypeError, match=r"dataset indices must be integers, not Tensor"):
        ds.__getitems__([5, torch.tensor(True)])  # type: ignore[list-item]
    # a 0-d integer tensor is an index, alone or among others
    assert ds[torch.tensor(-1)]["id"] == ds[total - 1]["id"]
    assert [r["id"] for r in ds.__getitems__([torch.tensor(2), 0])] == [
        ds[2]["id"], ds[0]["id"]]
    # the 1-d forms still serve the rows they name
    expected = [datagen.expected(total)[i] for i in (2, 0, total - 1)]
    for good in ([2, 0, -1], np.array([2, 0, -1]), torch.tensor([2, 0, -1])):
        assert [r["id"] for r in ds.__getitems__(good)] == [e["id"] for e in expected]

def test_methods_taking_many_indices_refuse_what_is_no_ordered_collection(
    uneven: tuple[Path, int],
) -> None:
    from undertale_duck import Mixture, Pack

    root, total = uneven
    ds = ParquetDataset(root)
    packed = ParquetDataset(root, pack=Pack(column="tokens", length=4))
    mixture = Mixture([ds])
    many = [
        ("locate_many", ds.locate_many),
        ("__getitems__", ds.__getitems__),
        ("__getitems__", packed.__getitems__),
        ("__getitems__", mixture.__getitems__),
    ]
    # None failed with Python's "not iterable"; bytes were read as their byte values (rows
    # 1 and 0), a set in an order of its own and a dict as its keys, by no error
    for bad, why in ((None, "NoneType"), ("01", "str"), (b"\x01\x00", "bytes"),
                     ({1, 0}, "set .a set has no order"), ({1: 0}, r"dict .pass list\(d\)"),
                     (5, "int")):
        for name, method in many:
            with pytest.raises(TypeError, match=rf"^{name}: indices must be a 1-d sequence "
                               rf"of integers .*, got {why}"):
                method(bad)  # type: ignore[arg-type]
        for dataset, noun in ((ds, "window"), (packed, "run")):
            if bad is not None:  # None clears the hint
                with pytest.raises(TypeError, match=f"prefetch takes a list of {noun} "
                                   "positions in the order they will be read"):
                    dataset.prefetch(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"__getitems__: .*got generator \(an iterator\)"):
        ds.__getitems__(i for i in range(2))  # type: ignore[arg-type]
    # what each took still works: locate_many any ordered iterable, prefetch a generator
    assert ds.locate_many(i for i in (2, 0)) == ds.locate_many([2, 0]) == [
        ds.locate(2), ds.locate(0)]
    assert ds.locate_many(np.array([-1])) == [ds.locate(total - 1)]
    ds.prefetch(k for k in (1, 0))
    packed.prefetch(iter([0]))
    assert ds[2]["id"] == datagen.row(2)["id"]


@pytest.mark.parametrize("fmt", ["python", "numpy", "torch"])
def test_a_bool_or_float_among_integer_indices_is_refused_as_alone(
    uneven: tuple[Path, int], fmt: str
) -> None:
    from undertale_duck import Mixture, Pack

    root, total = uneven
    ds = ParquetDataset(root, format=fmt)  # type: ignore[arg-type]
    view = ParquetDataset(root, format=fmt, where="label <> 3")  # type: ignore[arg-type]
    packed = ParquetDataset(root, format=fmt, pack=Pack(column="tokens", length=4))  # type: ignore[arg-type]
    mixture = Mixture([ds, view])
    # numpy read [5, True] as [5, 1], and a run of consecutive indices equal to [3, 4.0]
    # or [0, True] was served as rows, where ds[True], ds[4.0] and [True] are TypeErrors
    for bad, kind in (([5, True], "bool"), ([0, True], "bool"), ((6, False, 2), "bool"),
                      ([7, np.bool_(True)], "bool"), ([3, 4.0], "float"),
                      ([0, 1, 2.0], "float")):
        for target, noun in ((ds, "dataset"), (view, "dataset"), (packed, "dataset"),
                             (mixture, "mixture")):
            with pytest.raises(TypeError, match=f"{noun} indices must be integers, not {kind}"):
                target.__getitems__(bad)  # type: ignore[arg-type]
    expected = datagen.expected(total)
    for good in ([3, 4], (0, 1, 2), [0, np.int64(1)], [5, np.int32(2), 5]):
        got = [datagen.plain(r["id"]) for r in ds.__getitems__(good)]  # type: ignore[arg-type]
        assert got == [expected[int(i)]["id"] for i in good]


def test_windows_follow_row_groups(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root, window_bytes=1)  # one window per row group (or smaller)
    boundaries = set()
    for k, path in enumerate(ds.shards):
        meta = pq.read_metadata(path)
        start = 0
        for g in range(meta.num_row_groups):
            boundaries.add((k, start))
            start += meta.row_group(g).num_rows
    for w in ds.windows:
        assert w.rows >= 1
    assert sum(w.rows for w in ds.windows) == total
    # with a 1-byte target, every row group starts a window
    starts = {(w.shard, w.start) for w in ds.windows}
    assert boundaries - {(k, s) for k, s in boundaries if ds.source.shards[k].rows == s} <= starts
    assert [ds[i] for i in range(total)] == datagen.expected(total)


def test_columns_projection(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root, columns=["label", "id"])
    assert ds.columns == ["label", "id"]
    assert ds[10] == {"label": 10 % 7, "id": "row-00000010"}
    assert list(ds[10]) == ["label", "id"]
    assert ds.sql("SELECT * FROM dataset LIMIT 1").column_names == ["label", "id"]
    with pytest.raises(ColumnError, match="nope"):
        ParquetDataset(root, columns=["id", "nope"])
    with pytest.raises(ArgumentError):
        ParquetDataset(root, columns=[])
    with pytest.raises(ArgumentError):
        ParquetDataset(root, columns="id")


def test_source_forms(uneven: tuple[Path, int], tmp_path: Path) -> None:
    root, total = uneven
    files = sorted(root.glob("part-*.parquet"))
    assert len(ParquetDataset(files[0])) == 150
    assert len(ParquetDataset(str(root / "part-*.parquet"))) == total
    reversed_ds = ParquetDataset(list(reversed(files)))
    assert reversed_ds[0] == datagen.row(total - 2) | {"category": reversed_ds[0]["category"]}
    assert reversed_ds[0]["id"] == f"row-{total - 2:08d}"
    assert ParquetDataset(files[4]).shards == [str(files[4])]
    # clutter (_SUCCESS, .crc, hidden, README) is ignored
    assert [Path(p).name for p in ParquetDataset(root).shards] == [f.name for f in files]


@pytest.mark.parametrize("codec", ["snappy", "zstd", "gzip", "none", "lz4", "brotli"])
def test_codecs(tmp_path: Path, codec: str) -> None:
    datagen.write_shards(tmp_path, [40, 25], row_group_size=16, compression=codec)
    ds = ParquetDataset(tmp_path)
    assert [ds[i] for i in range(65)] == datagen.expected(65)


@pytest.mark.parametrize("codec", ["snappy", "zstd", "uncompressed"])
def test_files_written_by_duckdb(tmp_path: Path, codec: str) -> None:
    datagen.write_shards(tmp_path, [70, 0, 33], row_group_size=20, writer="duckdb",
                         compression=codec)
    ds = ParquetDataset(tmp_path)
    got = [ds[i] for i in range(len(ds))]
    expected = datagen.expected(103)
    # DuckDB writes the dictionary column as plain strings; values are what matter
    assert got == expected


def test_pickle_roundtrip_drops_connection(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root)
    first = ds[3]
    blob = pickle.dumps(ds)
    assert len(blob) < 200_000
    copy = pickle.loads(blob)
    assert copy._reader is None
    assert copy[3] == first
    assert copy[-1] == ds[-1]


def test_sql(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root)
    result = ds.sql("SELECT count(*) AS n, sum(label) AS s FROM dataset")
    assert result.to_pylist() == [{"n": total, "s": sum(i % 7 for i in range(total))}]
    by_param = ds.sql("SELECT id FROM dataset WHERE label = $l ORDER BY id LIMIT 2",
                      params={"l": 3})
    assert by_param.column("id").to_pylist() == ["row-00000003", "row-00000010"]
    assert ds.sql("SELECT id FROM dataset WHERE id = ?", ["row-00000004"]).num_rows == 1
    with pytest.raises(QueryError, match="nope"):
        ds.sql("SELECT nope FROM dataset")
    with pytest.raises(QueryError):
        ds.sql("SELEC 1")


@pytest.mark.parametrize(
    "statement",
    [
        "COPY (SELECT * FROM dataset) TO '{shard}' (FORMAT parquet)",
        "COPY (SELECT 1) TO '{root}/new.csv'",
        "ATTACH '{root}/x.db'",
        "CREATE OR REPLACE VIEW dataset AS SELECT 1",
        "SET temp_directory = '{root}'",
        "INSTALL httpfs",
        "SELECT 1; COPY (SELECT 1) TO '{root}/y.csv'",
    ],
)
def test_sql_is_read_only(uneven: tuple[Path, int], statement: str) -> None:
    root, total = uneven
    ds = ParquetDataset(root)
    before = sorted(p.name for p in root.iterdir())
    with pytest.raises(ReadOnlyError):
        ds.sql(statement.format(shard=ds.shards[0], root=root))
    assert sorted(p.name for p in root.iterdir()) == before
    assert len(ds) == total and ds[0]["id"] == "row-00000000"


def test_locate(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root)
    assert ds.locate(0) == (ds.shards[0], 0)
    assert ds.locate(150) == (ds.shards[1], 0)
    assert ds.locate(151) == (ds.shards[3], 0)
    assert ds.locate(-1) == (ds.shards[5], 1)


def test_bad_arguments(uneven: tuple[Path, int]) -> None:
    root, _ = uneven
    for memory in (-1, "big", None, True):
        with pytest.raises(ArgumentError, match="memory"):
            ParquetDataset(root, memory=memory)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="window_bytes"):
        ParquetDataset(root, window_bytes=0)


def test_zero_memory_still_serves(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root, memory=0)
    assert ds[100] == datagen.expected(101)[100]
    assert ds.cache_stats.entries == 0 and ds.cache_stats.bytes == 0


def test_all_empty_shards(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path, [0, 0])
    ds = ParquetDataset(tmp_path)
    assert len(ds) == 0
    with pytest.raises(IndexError):
        ds[0]
    assert ds.sql("SELECT count(*) AS n FROM dataset").to_pylist() == [{"n": 0}]


@pytest.mark.parametrize(
    ("argument", "given"),
    [
        ("columns", {"columns": ["id", "label\udcff"]}),
        ("where", {"where": "label = '\udcff'"}),
        ("query", {"query": 'SELECT id AS "\udcff" FROM dataset'}),
    ],
)
def test_text_arguments_that_are_not_utf8_are_named(
    tmp_path: Path, argument: str, given: dict[str, object]
) -> None:
    # a byte that is not UTF-8 (a file name, a terminal of another locale) reaches Python as
    # a lone surrogate, which DuckDB and the UTF-8 codec refused with their own errors
    datagen.write_shards(tmp_path, [6])
    refused = rf"^{argument} .*'.*\\xff.*', which is not valid UTF-8"
    with pytest.raises(ArgumentError, match=refused):
        ParquetDataset(tmp_path, **given)  # type: ignore[arg-type]
