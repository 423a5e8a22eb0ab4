"""Small batches fetched several at a time by a ``workers=0`` ChunkedLoader: same batches."""

from __future__ import annotations

import datetime
import functools
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from undertale_duck import (
    ChunkedSampler,
    OutOfRangeError,
    Pack,
    ParquetDataset,
    collate,
    load,
)
from undertale_duck.core.rows import RowBatch
from undertale_duck.training.collate import split_batch
from undertale_duck.training.loader import ChunkedLoader

SIZES = (300, 1, 170, 57)
TOTAL = sum(SIZES)
WIDTH = 6


def row(i: int) -> dict[str, Any]:
    """The row at global index ``i``: an id, fixed and ragged tokens, a label, a note."""
    return {
        "id": f"r-{i:06d}",
        "tokens": [(i * 17 + k) % 251 for k in range(WIDTH)],
        "ragged": list(range(i % 4)),
        "label": i % 5,
        "note": None if i % 7 == 0 else f"n{i % 11}",
    }


TYPES = {"id": pa.string(), "tokens": pa.list_(pa.int32()), "ragged": pa.list_(pa.int64()),
         "label": pa.int64(), "note": pa.string()}


#: Columns whose batches do not depend on which rows share one: a group is collated once and
#: cut (``split_batch``), where ``ragged`` (padded to its batch's longest) makes each part
#: collated alone.
PLAIN = ("id", "tokens", "label", "note")


def write(
    directory: Path, sizes: Sequence[int], group: int, columns: Sequence[str] = tuple(TYPES),
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    start = 0
    for k, size in enumerate(sizes):
        rows = [row(i) for i in range(start, start + size)]
        table = pa.table({c: pa.array([r[c] for r in rows], TYPES[c]) for c in columns})
        pq.write_table(table, directory / f"part-{k}.parquet", row_group_size=group)
        start += size
    return directory


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("groups"), SIZES, 64)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("plain"), SIZES, 64, PLAIN)


def ids(batch: Any) -> list[int]:
    if isinstance(batch, dict):
        return [int(v[2:]) for v in batch["id"]]
    return [int(r["id"][2:]) for r in batch]


def same(a: Any, b: Any) -> bool:
    """Whether two batches are equal value for value, type for type."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def pair(
    ds: Any, batch: int, drop_last: bool = False, **options: Any,
) -> tuple[ChunkedLoader, DataLoader[Any]]:
    """Our loader and torch's, over the same dataset, sampler settings and ``collate``."""
    def make(cls: type[DataLoader[Any]]) -> Any:
        return cls(ds, batch_size=batch, sampler=ChunkedSampler(ds, batch, 0, **options),
                   collate_fn=collate, drop_last=drop_last)
    return make(ChunkedLoader), make(DataLoader)


def per_group(loader: ChunkedLoader) -> int:
    """How many batches one fetch serves, once the epoch's first batch has been fetched."""
    iterator = iter(loader)
    next(iterator)
    return iterator._per_group  # type: ignore[attr-defined, no-any-return]


def epoch_cut(loader: ChunkedLoader) -> tuple[list[Any], bool]:
    """An epoch's batches, and whether every group was collated once and cut."""
    iterator = iter(loader)
    batches = list(iterator)
    return batches, iterator._ours  # type: ignore[attr-defined]


def outcomes(iterator: Iterator[Any]) -> list[Any]:
    """Every batch of an epoch, or ``(error type, message)`` where a batch raised."""
    out: list[Any] = []
    while True:
        try:
            out.append(next(iterator))
        except StopIteration:
            return out
        except Exception as exc:  # the loop goes on, as a training loop that skips would
            out.append((type(exc), str(exc)))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fmt=st.sampled_from(["numpy", "torch"]),
    batch=st.integers(1, 40),
    shuffle=st.booleans(),
    mix=st.integers(1, 3),
    window=st.sampled_from([None, 2_000, 9_000]),
    memory=st.sampled_from([1, 64]),
    ragged=st.booleans(),
    padding=st.sampled_from([None, -1]),
    drop_last=st.booleans(),
)
def test_grouped_epochs_equal_torchs_batch_for_batch(
    root: Path, plain: Path, fmt: str, batch: int, shuffle: bool, mix: int,
    window: int | None, memory: int, ragged: bool, padding: int | None, drop_last: bool,
) -> None:
    ds = ParquetDataset(root if ragged else plain, memory=memory,
                        format=fmt, window_bytes=window)  # type: ignore[arg-type]
    ours, theirs = pair(ds, batch, drop_last, shuffle=shuffle, seed=batch, mix=mix)
    if padding is not None:  # a partial of collate with an option: still ours
        ours.collate_fn = theirs.collate_fn = functools.partial(collate, padding_value=padding)
    assert per_group(ours) > 1  # small rows and batches: the grouped path is the one tested
    for epoch in (0, 3):
        ours.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        theirs.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        mine, cut = epoch_cut(ours)
        expected = list(theirs)
        # the ragged column is padded per batch: its groups are collated part by part
        assert cut is not ragged
        assert len(mine) == len(expected) == len(ours)
        assert all(same(a, b) for a, b in zip(mine, expected, strict=True))
    served = sorted(i for b in mine for i in ids(b))
    assert served == list(range(TOTAL)) or (drop_last and len(served) == TOTAL // batch * batch)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), length=st.integers(1, 30), fmt=st.sampled_from(["numpy", "torch"]))
def test_a_cut_batch_is_collate_of_each_part_or_none(
    data: st.DataObject, length: int, fmt: str,
) -> None:
    # columns of every kind collate treats alike or differently per batch, each value a
    # function of the row index; holes (None) drawn anywhere
    kinds = data.draw(st.lists(
        st.sampled_from(["tensor", "text", "bytes", "int", "ragged", "date", "struct"]),
        min_size=1, max_size=4, unique=True))
    holes = data.draw(st.sets(st.integers(0, length - 1)))
    whole: dict[str, Any] = {}
    values: dict[str, list[Any]] = {}
    for kind in kinds:
        if kind == "tensor":
            array = np.arange(length * 3, dtype=np.int32).reshape(length, 3)
            whole[kind] = torch.from_numpy(array) if fmt == "torch" else array
            continue
        make = {
            "text": lambda i: f"s{i}", "bytes": lambda i: b"b%d" % i, "int": lambda i: i,
            "ragged": lambda i: list(range(i % 3)), "struct": lambda i: {"k": i},
            "date": lambda i: datetime.date(2020, 1, 1 + i % 28),
        }[kind]
        values[kind] = [None if i in holes else make(i) for i in range(length)]
    cuts = sorted(c for c in data.draw(st.sets(st.integers(1, 30), max_size=6)) if c < length)
    starts = [0, *cuts]
    sizes = [b - a for a, b in itertools.pairwise([*starts, length])]

    def rows() -> RowBatch:
        return RowBatch(kinds, length, dict(whole), {k: list(v) for k, v in values.items()})

    expected = [collate(part) for part in rows().split(sizes) or []]
    group = rows()
    got = split_batch(collate(group), group, sizes)
    # collate keeps a batch's values as a list whenever its first is text or a hole: then,
    # and only then, a column's batches do not depend on which rows share one
    cut = all(
        kind == "tensor" or all(type(values[kind][a]) in (str, bytes, type(None)) for a in starts)
        for kind in kinds
    )
    if not cut:
        assert got is None
        return
    assert got is not None and len(got) == len(sizes) == len(expected)
    assert all(same(a, b) for a, b in zip(got, expected, strict=True))
    if "tensor" in kinds:  # views of the group's tensor, not copies
        assert len({b["tensor"].untyped_storage().data_ptr() for b in got}) == 1
    assert split_batch(collate(group), group, [*sizes, 1]) is None  # sizes past the rows
    assert split_batch(collate(group), group, [0, *sizes]) is None  # an empty part


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_grouped_packed_blocks_equal_torchs(root: Path, fmt: str, shuffle: bool) -> None:
    ds = ParquetDataset(root, memory=64, format=fmt,  # type: ignore[arg-type]
                        pack=Pack(column="ragged", length=5, eod=-1, segment_ids=True))
    ours, theirs = pair(ds, 3, shuffle=shuffle, seed=11)
    assert per_group(ours) > 1
    mine, expected = list(ours), list(theirs)
    assert len(mine) == len(expected) == len(ours) > 10
    assert all(same(a, b) for a, b in zip(mine, expected, strict=True))


@pytest.mark.parametrize(("fmt", "batch", "expected"), [
    ("torch", 8, 128),  # 1,024 rows of about 100 bytes: the row cap
    ("numpy", 100, 10),
    ("torch", 256, 4),
    ("torch", 200, 5),
    ("torch", 600, 1),  # two would pass the row cap
    ("torch", 1024, 1),
    ("python", 8, 1),  # Python rows are not grouped: their per-row cost dwarfs a fetch's
])
def test_how_many_batches_one_fetch_serves(
    root: Path, fmt: str, batch: int, expected: int,
) -> None:
    ds = ParquetDataset(root, memory=64, format=fmt)  # type: ignore[arg-type]
    assert per_group(load(ds, None, collate, batch)) == expected


def test_wide_rows_keep_a_group_within_a_mebibyte(tmp_path: Path) -> None:
    # rows of 128 KiB: a batch of 2 is 256 KiB, so a fetch serves 4 batches (1 MiB)
    width = 32 * 1024
    table = pa.table({"x": pa.array([[i] * width for i in range(40)], pa.list_(pa.int32()))})
    pq.write_table(table, tmp_path / "wide.parquet", row_group_size=8)
    ds = ParquetDataset(tmp_path / "wide.parquet", memory=64, format="torch")
    assert per_group(load(ds, None, collate, 2)) == 4
    assert per_group(load(ds, None, collate, 5)) == 1  # 640 KiB: two would pass 1 MiB
    batches = list(load(ds, None, collate, 2))
    assert [int(b["x"][k, -1]) for b in batches for k in range(2)] == list(range(40))


def test_a_subclass_that_reads_its_batch_is_handed_each_batch_alone(root: Path) -> None:
    seen: list[int] = []

    class Recording(ParquetDataset):
        def __getitems__(self, indices: Sequence[int]) -> Any:
            seen.append(len(indices))
            return super().__getitems__(indices)

    ds = Recording(root, memory=64, format="torch")
    ours, theirs = pair(ds, 7)
    mine = list(ours)
    assert seen == [7] * (TOTAL // 7) + [TOTAL % 7] and TOTAL % 7
    assert all(same(a, b) for a, b in zip(mine, list(theirs), strict=True))


def test_an_instances_own_getitems_is_handed_each_batch_alone(root: Path) -> None:
    ds = ParquetDataset(root, memory=64, format="torch")
    seen: list[int] = []
    fetch = ds.__getitems__

    def recording(indices: Sequence[int]) -> Any:
        seen.append(len(indices))
        return fetch(indices)

    ds.__getitems__ = recording  # type: ignore[method-assign]
    loader = load(ds, None, collate, 7)
    assert sum(len(ids(b)) for b in loader) == TOTAL
    assert seen == [7] * (TOTAL // 7) + [TOTAL % 7]


def test_an_interrupt_inside_a_group_fetch_loses_no_batch(root: Path) -> None:
    ds = ParquetDataset(root, memory=64, format="torch")
    ours, theirs = pair(ds, 5)
    iterator = iter(ours)
    inner = iterator  # ours: it fetches and counts
    fetch = inner._fetch
    interrupts: list[int] = []

    def interrupted(indices: list[int]) -> Any:
        if len(indices) > 5 and not interrupts:  # the first group's fetch, as Ctrl-C would
            interrupts.append(len(indices))
            raise KeyboardInterrupt
        return fetch(indices)

    inner._fetch = interrupted
    mine: list[Any] = []
    while True:
        try:
            mine.append(next(iterator))
        except KeyboardInterrupt:
            assert ours.state_dict() == ours.sampler.state_dict(len(mine) * 5)  # type: ignore[attr-defined]
            continue
        except StopIteration:
            break
    assert interrupts and interrupts[0] > 5
    expected = list(theirs)
    assert len(mine) == len(expected)
    assert all(same(a, b) for a, b in zip(mine, expected, strict=True))


@pytest.mark.parametrize("data", ["root", "plain"])  # parts collated alone, a group cut
def test_writing_into_a_batch_changes_no_other_batch_and_no_later_epoch(
    data: str, request: pytest.FixtureRequest,
) -> None:
    ds = ParquetDataset(request.getfixturevalue(data), memory=64, format="torch")
    ours, theirs = pair(ds, 6)
    expected = list(theirs)
    shared = 0
    previous: Any = None
    for epoch in range(2):
        for k, batch in enumerate(ours):
            # the batches after this one in its group were cut before it was written
            assert same(batch, expected[k]), (epoch, k)
            if previous is not None:
                a, b = previous["tokens"], batch["tokens"]
                shared += a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
            for value in batch.values():
                if isinstance(value, torch.Tensor):
                    value.fill_(-3 if value.dtype != torch.bool else False)
            previous = batch
    assert shared > 0  # the batches of a group really are parts of one fetch


@pytest.mark.parametrize("fmt", ["torch", "numpy"])
def test_a_failing_row_fails_its_own_batch_after_the_ones_before(
    tmp_path: Path, fmt: str,
) -> None:
    # row 45 holds a uint64 no torch integer holds: in the torch format the fetch of its
    # group fails; in the numpy format the fetch holds it and the group's collate fails
    values = np.arange(90, dtype=np.uint64)
    values[45] = 2**63 + 5
    table = pa.table({"id": [f"r-{i:06d}" for i in range(90)], "big": pa.array(values)})
    pq.write_table(table, tmp_path / "big.parquet", row_group_size=30)
    ds = ParquetDataset(tmp_path / "big.parquet", memory=64, format=fmt)  # type: ignore[arg-type]
    ours, theirs = pair(ds, 4)
    assert per_group(ours) > 1
    mine, expected = outcomes(iter(ours)), outcomes(iter(theirs))
    assert len(mine) == len(expected) == 23
    for k, (a, b) in enumerate(zip(mine, expected, strict=True)):
        if k == 11:  # rows 44-47
            assert a == b and a[0] is OutOfRangeError
            assert ("row 45" if fmt == "torch" else "column 'big'") in a[1]
        else:
            assert same(a, b), k
    assert [i for b in mine if isinstance(b, dict) for i in ids(b)] == [
        i for i in range(90) if not 44 <= i < 48
    ]


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.integers(1, 30), stop=st.integers(0, 200), shuffle=st.booleans())
def test_a_state_saved_inside_a_group_resumes_at_the_next_batch(
    root: Path, batch: int, stop: int, shuffle: bool,
) -> None:
    ds = ParquetDataset(root, memory=64, format="torch")

    def make() -> ChunkedLoader:
        return load(ds, None, collate, batch, shuffle=shuffle, seed=7)

    whole = [ids(b) for b in make()]
    stop = stop % len(whole)
    loader = make()
    iterator = iter(loader)
    head = [ids(next(iterator)) for _ in range(stop)]
    resumed = make()
    resumed.load_state_dict(loader.state_dict())
    assert head + [ids(b) for b in resumed] == whole


@settings(max_examples=60, deadline=None)
@given(data=st.data(), length=st.integers(0, 40))
def test_split_parts_equal_the_rows_they_cut(data: st.DataObject, length: int) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, length), max_size=6)))
    bounds = [0, *cuts, length]
    sizes = [b - a for a, b in itertools.pairwise(bounds)]
    tokens = torch.arange(length * 3).reshape(length, 3)
    names = [f"n{i}" for i in range(length)]
    rows = RowBatch(["t", "name"], length, {"t": tokens}, {"name": names})
    parts = rows.split(sizes)
    assert parts is not None and [len(p) for p in parts] == sizes
    for part, (a, b) in zip(parts, itertools.pairwise(bounds), strict=True):
        assert part.keys() == ["t", "name"]
        assert torch.equal(part.batched("t"), tokens[a:b])  # type: ignore[arg-type]
        assert part.column("name") == names[a:b]
        assert [(int(r["t"][0]), r["name"]) for r in part] == [
            (3 * i, f"n{i}") for i in range(a, b)
        ]
    assert rows.split([*sizes, 1]) is None  # sizes that do not add up to the rows
    if length:
        rows[0]["t"] = torch.zeros(3)
        assert rows.split(sizes) is None  # rows accessed (and changed): no columns to cut


def test_nbytes_counts_buffers_strings_and_nested_values() -> None:
    rows = RowBatch(
        ["a", "b", "c"], 2,
        {"a": torch.zeros((2, 4), dtype=torch.int32)},
        {"b": ["xyz", b"12"], "c": [[np.zeros(3, dtype=np.int8)], {"k": "abcd"}]},
    )
    assert rows.nbytes() == 32 + 3 + 2 + (8 + 3) + (8 + 4)
