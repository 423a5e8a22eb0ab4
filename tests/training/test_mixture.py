from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen
from torch.utils.data import DataLoader

from undertale_duck import (
    ArgumentError,
    ChunkedSampler,
    Mixture,
    ParquetDataset,
    SourceError,
    Stream,
    batch_rows,
    load,
)
from undertale_duck.training.lookup import batch_indices
from undertale_duck.training.mixture import take


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    datagen.write_shards(a, [60, 40], row_group_size=[16, 16])
    datagen.write_shards(b, [30], row_group_size=[8])
    return a, b


def _ids(mix: Mixture, indices: list[int]) -> list[str]:
    return [mix[i]["id"] for i in indices]


def test_proportions_per_epoch_and_determinism(two: tuple[Path, Path]) -> None:
    a, b = two
    mix = Mixture(
        [Stream(ParquetDataset(a), proportion=0.7, name="code"),
         Stream(ParquetDataset(b), proportion=0.3, name="text")],
        epoch_size=200,
    )
    assert mix.counts == [140, 60] and mix.epoch_size == 200
    sampler = ChunkedSampler(mix, 10, workers=0, shuffle=True, seed=5)
    assert len(sampler) == 200
    for epoch in range(3):
        order = sampler.order(epoch)
        sources = Counter(mix.source_of(int(i))[0] for i in order)
        assert sources == {0: 140, 1: 60}
        # stream b (30 rows) is upsampled: each row exactly twice per epoch
        b_rows = Counter(int(i) for i in order if mix.source_of(int(i))[0] == 1)
        assert set(b_rows.values()) == {2} and len(b_rows) == 30
        again = ChunkedSampler(mix, 10, workers=0, shuffle=True, seed=5).order(epoch)
        assert list(again) == list(order)
    assert list(sampler.order(0)) != list(sampler.order(1))


def test_repeat_and_choose_and_plain(two: tuple[Path, Path]) -> None:
    a, b = two
    mix = Mixture([Stream(ParquetDataset(a), choose=25), Stream(ParquetDataset(b), repeat=1.5)])
    assert mix.counts == [25, 45]
    order = ChunkedSampler(mix, 5, workers=0, shuffle=False).order(0)
    first = [int(i) for i in order if i < 100]
    assert len(first) == 25 and len(set(first)) == 25
    second = Counter(int(i) - 100 for i in order if i >= 100)
    assert sum(second.values()) == 45 and max(second.values()) == 2
    plain = Mixture([ParquetDataset(a), ParquetDataset(b)])
    assert plain.counts == [100, 30]
    assert _ids(plain, [0, 99, 100, 129]) == [
        "row-00000000", "row-00000099", "row-00000000", "row-00000029"
    ]


def test_every_row_through_a_dataloader_with_workers(two: tuple[Path, Path]) -> None:
    a, b = two
    mix = Mixture([Stream(ParquetDataset(a, memory=1), proportion=1),
                   Stream(ParquetDataset(b, memory=1), proportion=1)], epoch_size=120)
    sampler = ChunkedSampler(mix, 6, workers=2, shuffle=True, seed=1)
    loader = DataLoader(mix, batch_size=6, sampler=sampler, num_workers=2, collate_fn=list)
    got = [row["id"] for batch in loader for row in batch]
    expected = [mix[int(i)]["id"] for i in sampler.order(0)]
    assert got == expected and len(got) == 120


def test_bad_streams(two: tuple[Path, Path]) -> None:
    a, b = two
    ds = ParquetDataset(a)
    with pytest.raises(ArgumentError):
        Mixture([])
    with pytest.raises(ArgumentError):
        Mixture([Stream(ds, proportion=0.5, repeat=2)])
    with pytest.raises(ArgumentError):
        Mixture([Stream(ds, proportion=0.5), Stream(ds)])
    with pytest.raises(ArgumentError):
        Mixture([Stream(ds, repeat=-1)])
    with pytest.raises(ArgumentError):
        Mixture([Stream(ds)], epoch_size=10)


def test_a_stream_without_rows_cannot_be_asked_for_rows(two: tuple[Path, Path]) -> None:
    a, _ = two
    ds, empty = ParquetDataset(a), ParquetDataset(a, where="false")
    # its share of the epoch would be missing: ranks would get unequal counts (DDP hangs)
    with pytest.raises(ArgumentError, match=r"stream 1 \(none\) has no rows"):
        Mixture([Stream(ds, proportion=0.5), Stream(empty, proportion=0.5, name="none")])
    with pytest.raises(ArgumentError, match=r"stream 1 .* has no rows"):
        Mixture([Stream(ds), Stream(empty, choose=10)])
    mix = Mixture([Stream(ds, proportion=1), Stream(empty, proportion=0)], epoch_size=50)
    assert mix.counts == [50, 0]
    mix = Mixture([Stream(ds), Stream(empty, repeat=3)])
    assert mix.counts == [100, 0]


def test_every_rank_gets_what_its_length_says_for_any_epoch_size(two: tuple[Path, Path]) -> None:
    a, b = two
    ds, other = ParquetDataset(a), ParquetDataset(b)
    for streams, epoch_size, counts in (
        ([Stream(ds, choose=0), Stream(other, choose=0)], None, [0, 0]),
        ([Stream(ds, proportion=0), Stream(other, proportion=1)], 0, [0, 0]),
        # huge proportions do not add up to inf; tiny ones are not lost
        ([Stream(ds, proportion=1e308), Stream(other, proportion=1e308)], 60, [30, 30]),
        ([Stream(ds, proportion=5e-324), Stream(other, proportion=1e-323)], 60, [20, 40]),
    ):
        mix = Mixture(streams, epoch_size=epoch_size)
        assert mix.counts == counts
        for shuffle in (False, True):
            seen: list[int] = []
            for rank in range(2):
                sampler = ChunkedSampler(mix, 4, 2, 2, rank, shuffle=shuffle, drop_last=False)
                order = list(sampler)
                assert len(order) == len(sampler)
                seen += order
            assert len(seen) == sum(counts)


@pytest.mark.parametrize("options", [{"epoch_size": -10}, {"epoch_size": 10.5},
                                     {"epoch_size": True}, {"chunk": 0}])
def test_bad_epoch_sizes_and_chunks_are_our_error(
    two: tuple[Path, Path], options: dict[str, object]
) -> None:
    a, b = two
    streams = [Stream(ParquetDataset(a), proportion=1), Stream(ParquetDataset(b), proportion=1)]
    with pytest.raises(ArgumentError, match=next(iter(options))):
        Mixture(streams, **options)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="choose"):
        Mixture([Stream(ParquetDataset(a), choose=True)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("streams", "options", "message"),
    [
        ([{"choose": 10**30}], {}, r"stream 0: choose makes 1e\+30 rows per epoch"),
        ([{"choose": 2**63}], {}, r"stream 0: choose makes 9.22e\+18 rows"),
        ([{}, {"repeat": 1e300}], {}, r"stream 1: repeat=1e\+300 of its 30 rows makes"),
        ([{"proportion": 1}, {"proportion": 1}], {"epoch_size": 10**30},
         r"epoch_size makes 1e\+30 rows"),
        ([{"choose": 2**63 - 1}, {"choose": 1}], {}, r"the streams' rows per epoch \(their sum\)"),
    ],
)
def test_epochs_beyond_what_an_order_can_index_are_refused_when_the_mixture_is_built(
    two: tuple[Path, Path], streams: list[dict[str, Any]], options: dict[str, Any],
    message: str,
) -> None:
    # they were accepted, and refused by the sampler as an order too large for memory
    a, b = two
    sources = [ParquetDataset(a), ParquetDataset(b)]
    with pytest.raises(ArgumentError, match=message + r".*2\*\*63 - 1"):
        Mixture([Stream(sources[k], **s) for k, s in enumerate(streams)], **options)
    # the largest count an order can index is still a count (the sampler then says memory)
    assert Mixture([Stream(sources[0], choose=2**63 - 1)]).epoch_size == 2**63 - 1


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6),
    count=st.integers(0, 80),
    start=st.integers(0, 100),
)
def test_take_covers_exact_counts(sizes: list[int], count: int, start: int) -> None:
    units, at = [], 0
    for n in sizes:
        units.append((at, at + n))
        at += n
    ranges = take(units, count, start)
    rows = Counter(r for a, b in ranges for r in range(a, b))
    assert sum(rows.values()) == count
    if count:
        assert max(rows.values()) - min(rows.values(), default=0) <= 1 or len(rows) < at
    full, rest = divmod(count, at)
    assert sum(1 for v in rows.values() if v == full + 1) == rest
    assert all(b > a for a, b in ranges)


def test_batch_lookup_matches_what_the_loader_yielded(tmp_path: Path) -> None:
    root = tmp_path / "d"
    datagen.write_shards(root, [50, 37, 41], row_group_size=[10, 10, 10])
    for rank in (0, 1):
        loader = load(root, None, None, 8, workers=2, shuffle=True, seed=4, ranks=2, rank=rank)
        loader.sampler.set_epoch(1)
        batches = [[r["id"] for r in batch] for batch in loader]
        for step in (0, 3, len(batches) - 1):
            rows = batch_rows(loader.sampler, step, epoch=1, values=True)
            assert [r["row"]["id"] for r in rows] == batches[step]
            for r in rows:
                shard = pq.read_table(r["shard"])
                assert shard.column("id")[r["shard_row"]].as_py() == r["row"]["id"]
        with pytest.raises(ArgumentError, match="beyond the epoch"):
            batch_indices(loader.sampler, len(batches), epoch=1)


def test_batch_lookup_takes_a_step_as_every_integer_argument(tmp_path: Path) -> None:
    root = tmp_path / "d"
    datagen.write_shards(root, [50, 37], row_group_size=[10, 10])
    sampler = ChunkedSampler(ParquetDataset(root), 8, 0, shuffle=True, seed=4)
    # a numpy step (from an index computed with numpy) was refused, unlike epoch= or seed=
    assert batch_indices(sampler, np.int64(2)) == batch_indices(sampler, 2)
    for bad in (True, -1, 1.0, "2"):
        with pytest.raises(ArgumentError, match="step must be an integer >= 0"):
            batch_indices(sampler, bad)


def test_batch_lookup_names_mixture_sources(two: tuple[Path, Path]) -> None:
    a, b = two
    mix = Mixture([Stream(ParquetDataset(a), name="code"), Stream(ParquetDataset(b), name="text")])
    sampler = ChunkedSampler(mix, 16, workers=0, shuffle=True, seed=2)
    rows = batch_rows(sampler, 2)
    for r in rows:
        stream = "code" if r["index"] < 100 else "text"
        assert r["source"] == stream
        assert Path(r["shard"]).parent.name == ("a" if stream == "code" else "b")


def test_resume_refuses_changed_data(tmp_path: Path) -> None:
    root = tmp_path / "d"
    datagen.write_shards(root, [40, 40], row_group_size=[10, 10])
    loader = load(root, None, None, 4, shuffle=True, where="label <> 3")
    state = loader.state_dict()
    assert state["data"] == loader.dataset.fingerprint
    # another view over the same files
    other = load(root, None, None, 4, shuffle=True, where="label <> 2")
    with pytest.raises(ArgumentError, match="other data"):
        other.load_state_dict(state)
    # a changed shard (same length: only the fingerprint tells)
    shard = root / "part-00001.parquet"
    table = pq.read_table(shard)
    pq.write_table(table, shard, row_group_size=10)
    os.utime(shard, ns=(5, 5))
    changed = load(root, None, None, 4, shuffle=True, where="label <> 3")
    with pytest.raises(ArgumentError, match="other data"):
        changed.load_state_dict(state)
    lenient = load(root, None, None, 4, shuffle=True, where="label <> 3", check_data=False)
    lenient.load_state_dict(state)
    same = load(root, None, None, 4, shuffle=True, where="label <> 3")
    assert same.dataset.fingerprint != state["data"]
    fresh = load(root, None, None, 4, shuffle=True, where="label <> 3")
    fresh.load_state_dict(fresh.state_dict())


def test_streams_given_as_sources_are_opened_with_the_mixtures_options(
    two: tuple[Path, Path]
) -> None:
    a, b = two
    mix = Mixture([Stream(a, proportion=3, where="label <> 1"),
                   Stream([b / "part-00000.parquet"], proportion=1,
                          query="SELECT id, len(tokens) AS n FROM dataset",
                          options={"format": "numpy"})],
                  epoch_size=80, columns=["id", "tokens", "label"], memory=8)
    try:
        opened = [s.dataset for s in mix.streams]
        assert all(isinstance(ds, ParquetDataset) for ds in opened)
        assert opened[0].memory_bytes == opened[1].memory_bytes == 8 << 20
        assert opened[0].format == "python" and opened[1].format == "numpy"
        assert len(opened[0]) == sum(1 for r in datagen.expected(100) if r["label"] != 1)
        assert mix[0] == {k: v for k, v in datagen.row(0).items() if k in ("id", "tokens", "label")}
        assert int(mix[len(opened[0]) + 4]["n"]) == len(datagen.row(4)["tokens"])
        assert mix.counts == [60, 20]
        plain = Mixture([str(a), b])  # plain sources: every row once
        assert plain.counts == [100, 30]
        plain.close()
    finally:
        mix.close()


def test_bad_source_options(two: tuple[Path, Path]) -> None:
    a, b = two
    with pytest.raises(ArgumentError, match="unknown option"):
        Mixture([Stream(a)], storage_option={})
    with pytest.raises(ArgumentError, match="per stream"):
        Mixture([Stream(a)], where="label = 1")
    with pytest.raises(ArgumentError, match="stream 1: unknown option"):
        Mixture([Stream(a), Stream(b, options={"cachedir": "x"})])
    with pytest.raises(ArgumentError, match="already open"):
        Mixture([Stream(ParquetDataset(a), where="label = 1")])
    with pytest.raises(ArgumentError, match="every stream is an open dataset"):
        Mixture([ParquetDataset(a)], cache_dir="x")
    with pytest.raises(ArgumentError, match="list of streams"):
        Mixture(str(a))


# ---------------------------------------------------------------------- load(), DataModule
def _rows(rows: list[dict[str, object]]) -> list[str]:
    return [f"{r['src']}:{r['id']}" for r in rows]


def _mixture(a: Path, b: Path, size: int = 90) -> Mixture:
    def tagged(name: str) -> str:
        return f"SELECT id, label, '{name}' AS src FROM dataset"

    return Mixture([Stream(a, proportion=2, name="a", query=tagged("a")),
                    Stream(b, proportion=1, name="b", query=tagged("b"))],
                   epoch_size=size, memory=1)


@pytest.mark.parametrize("workers", [0, 2])
def test_load_serves_a_mixture_and_resumes_it(two: tuple[Path, Path], workers: int) -> None:
    a, b = two
    mix = _mixture(a, b)
    whole = load(mix, None, _rows, 8, workers=workers, shuffle=True, seed=5)
    epochs = []
    for epoch in range(2):
        whole.sampler.set_epoch(epoch)
        rows = [r for batch in whole for r in batch]
        assert len(rows) == len(set(rows)) == 90  # every chosen row once
        assert Counter(r[0] for r in rows) == {"a": 60, "b": 30}  # proportions kept
        epochs.append(rows)
    assert epochs[0] != epochs[1]
    first = load(_mixture(a, b), None, _rows, 8, workers=workers, shuffle=True, seed=5)
    first.sampler.set_epoch(1)
    it = iter(first)
    seen = [r for _ in range(4) for r in next(it)]
    state = first.state_dict()
    assert state["consumed"] == 32 and state["data"] == mix.fingerprint
    second = load(_mixture(a, b), None, _rows, 8, workers=workers, shuffle=True, seed=5)
    second.load_state_dict(state)
    second.sampler.set_epoch(1)
    assert seen + [r for batch in second for r in batch] == epochs[1]
    steps = batch_rows(second.sampler, 1, epoch=1)
    assert [s["index"] for s in steps] == batch_indices(whole.sampler, 1, epoch=1)


def test_resuming_a_mixture_checks_its_fingerprint(two: tuple[Path, Path]) -> None:
    a, b = two
    state = load(_mixture(a, b), None, None, 8, shuffle=True).state_dict()
    other = load(_mixture(a, b, size=80), None, None, 8, shuffle=True)
    with pytest.raises(ArgumentError, match="other"):
        other.load_state_dict(state)


def test_a_mixtures_streams_are_validated(two: tuple[Path, Path]) -> None:
    from undertale_duck import SchemaError
    from undertale_duck import schema as schemas

    a, b = two

    class Rows(schemas.Dataset):
        label: int

    load(_mixture(a, b), Rows, None, 8)
    with pytest.raises(SchemaError):
        load(_mixture(a, b), schemas.TokenizedDataset, None, 8)


def test_datamodule_trains_on_a_mixture(two: tuple[Path, Path]) -> None:
    from undertale_duck import DataModule

    a, b = two
    dm = DataModule(_mixture(a, b), _mixture(a, b), None, _rows, 8, seed=3)
    rows = [r for batch in dm.train_dataloader() for r in batch]
    assert len(rows) == 90 and len([r for batch in dm.val_dataloader() for r in batch]) == 90
    it = iter(dm.train_dataloader())
    seen = [r for _ in range(3) for r in next(it)]
    state = dm.state_dict()
    fresh = DataModule(_mixture(a, b), None, None, _rows, 8, seed=3)
    fresh.load_state_dict(state)
    assert seen + [r for batch in fresh.train_dataloader() for r in batch] == rows


def test_a_mixture_where_a_path_is_expected_is_one_clear_line(two: tuple[Path, Path]) -> None:
    a, b = two
    mix = _mixture(a, b)
    with pytest.raises(SourceError) as info:
        ParquetDataset(mix)  # type: ignore[arg-type]
    text = str(info.value)
    assert "Mixture" in text and "\n" not in text and "row-" not in text and len(text) < 250
    assert "load(), DataModule" in text
    with pytest.raises(SourceError, match="is a ParquetDataset, not a path"):
        ParquetDataset(ParquetDataset(a))  # type: ignore[arg-type]
    with pytest.raises(SourceError, match="a Stream belongs in a Mixture"):
        load(Stream(a), None, None, 8)  # type: ignore[arg-type]
    with pytest.raises(SourceError, match="not int"):
        ParquetDataset(3)  # type: ignore[arg-type]


def test_a_mixture_of_plain_datasets_resumes_in_another_process(two: tuple[Path, Path]) -> None:
    # a stream without a fingerprint counts by its type and length, not its repr (which
    # names its address: another one in the process that resumes, so the state was refused)
    class Rows:
        def __init__(self, n: int) -> None:
            self.n = n

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: int) -> int:
            return i

    def mixture() -> Mixture:
        return Mixture([Stream(Rows(50), proportion=0.5), Stream(Rows(30), proportion=0.5)])

    saved = mixture()
    sampler = ChunkedSampler(saved, 4, 0, shuffle=True, seed=1)
    seen = [i for _, i in zip(range(12), sampler, strict=False)]
    again = ChunkedSampler(mixture(), 4, 0, shuffle=True, seed=1)  # new objects, new addresses
    again.load_state_dict(sampler.state_dict())
    assert seen + list(again) == sampler.order().tolist()
    other = ChunkedSampler(Mixture([Stream(Rows(51), proportion=0.5),
                                    Stream(Rows(30), proportion=0.5)]), 4, 0, shuffle=True,
                           seed=1)
    with pytest.raises(ArgumentError, match="other"):
        other.load_state_dict(sampler.state_dict())


def test_a_mixture_with_an_empty_epoch_yields_nothing_and_says_so() -> None:
    empty = Mixture([Stream(list(range(30)), choose=0)])
    sampler = ChunkedSampler(empty, 4, 0)
    assert empty.epoch_size == 0 and len(sampler) == 0 and list(sampler) == []


def test_a_shuffled_mixture_over_other_windows_is_refused(two: tuple[Path, Path]) -> None:
    a, b = two

    def mixture(window_bytes: int | None) -> Mixture:
        return Mixture([Stream(ParquetDataset(a, window_bytes=window_bytes), proportion=0.5),
                        Stream(ParquetDataset(b), proportion=0.5)], epoch_size=90)

    state = load(mixture(None), None, None, 8, shuffle=True).state_dict()
    other = load(mixture(300), None, None, 8, shuffle=True)
    assert other.dataset.fingerprint == state["data"]
    with pytest.raises(ArgumentError, match="windows"):
        other.load_state_dict(state)


def test_an_empty_view_stream_cannot_be_asked_for_rows_either(two: tuple[Path, Path]) -> None:
    # its share of the epoch would be missing: a sequence shorter than the epoch, samplers
    # whose length is not what they yield, and ranks running different numbers of batches
    a, b = two
    empty = ParquetDataset(a, where="label > 100")
    assert len(empty) == 0
    for stream in (Stream(empty, proportion=0.5), Stream(empty, choose=3)):
        other = Stream(ParquetDataset(b), proportion=0.5 if stream.proportion else None)
        with pytest.raises(ArgumentError, match=r"stream 0 .* no rows"):
            Mixture([stream, other])
    mix = Mixture([Stream(empty, repeat=2.0), Stream(ParquetDataset(b), choose=5)])
    assert mix.counts == [0, 5] and len(list(ChunkedSampler(mix, 2, 0))) == 5


def test_numpy_weights_count_as_numbers_and_bools_do_not(two: tuple[Path, Path]) -> None:
    # weights computed with numpy (np.float32 is no float subclass, np.int64 no int)
    a, b = two
    ds, other = ParquetDataset(a), ParquetDataset(b)
    plain = Mixture([Stream(ds, proportion=0.25), Stream(other, proportion=0.75)],
                    epoch_size=80)
    numpy = Mixture([Stream(ds, proportion=np.float32(0.25)),
                     Stream(other, proportion=np.float16(0.75))], epoch_size=np.int64(80))
    assert numpy.counts == plain.counts == [20, 60]
    assert numpy.fingerprint == plain.fingerprint
    chosen = Mixture([Stream(ds, choose=np.int64(7)), Stream(other, repeat=np.float32(2))])
    assert chosen.counts == [7, 60]
    sampler = ChunkedSampler(chosen, 4, 0, shuffle=True, seed=np.int64(2), drop_last=False)
    assert Counter(chosen.source_of(i)[0] for i in sampler) == {0: 7, 1: 60}
    for bad in (Stream(ds, proportion=True), Stream(ds, repeat=np.bool_(True)),
                Stream(ds, choose=np.float64(3))):
        with pytest.raises(ArgumentError, match="stream 0"):
            Mixture([bad, Stream(other, proportion=1) if bad.proportion else other])


@pytest.mark.parametrize("stream", [None, object(), 42, Stream(3.5)])
def test_a_stream_that_is_neither_a_source_nor_a_dataset_is_our_error(
    two: tuple[Path, Path], stream: object
) -> None:
    a, _ = two
    with pytest.raises(ArgumentError, match=r"stream 1: .* neither a source .* nor a map-style"):
        Mixture([ParquetDataset(a), stream])


def test_mixture_indexes_like_a_dataset(two: tuple[Path, Path]) -> None:
    a, b = two
    da, db = ParquetDataset(a), ParquetDataset(b)
    mix = Mixture([da, db])
    n = len(mix)
    assert n == 130
    # negative indices count from the end, as ParquetDataset's do
    assert mix[-1] == db[-1] and mix[-n] == da[0] and mix[-31] == da[-1]
    assert mix.source_of(-1) == (1, 29)
    assert mix.__getitems__([-1, 0, np.int64(-130)]) == [db[-1], da[0], da[0]]
    for bad in (n, -n - 1):
        with pytest.raises(IndexError, match=rf"mixture index {bad} out of range for 130 "
                                             r"rows \(valid: -130 to 129\)"):
            mix[bad]
        with pytest.raises(IndexError, match="valid: -130 to 129"):
            mix.__getitems__([0, bad])
    # a float is refused, as by ParquetDataset, never truncated to another row
    for bad_index in (1.5, 1.0, True, np.float64(2.0), np.arange(2)):
        with pytest.raises(TypeError, match="mixture indices must be integers"):
            mix[bad_index]  # type: ignore[index]
        with pytest.raises(TypeError):
            da[bad_index]  # type: ignore[index]
    # indices that are not one row of integers: our TypeError, naming the shape
    import torch

    for bad_batch in (np.zeros((2, 2), dtype=np.int64), np.array(1), torch.tensor(1), None):
        with pytest.raises(TypeError, match="__getitems__: indices must be a 1-d sequence"):
            mix.__getitems__(bad_batch)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="indices is a tensor on the meta device"):
        mix.__getitems__(torch.arange(2, device="meta"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"mixture indices must be integers.*meta device"):
        mix[torch.tensor(1, device="meta")]  # type: ignore[index]
    # torch gives these __index__ (True as 1, [7] as 7): refused as ds[True] is
    for bad_tensor in (torch.tensor(True), torch.tensor([7]), torch.tensor([[7]])):
        with pytest.raises(TypeError, match="mixture indices must be integers, not Tensor"):
            mix[bad_tensor]  # type: ignore[index]
    assert mix[torch.tensor(-1)] == db[-1]
    assert mix.__getitems__(torch.tensor([-1, 0])) == [db[-1], da[0]]


def test_proportions_adding_up_to_more_than_one_are_rescaled(two: tuple[Path, Path]) -> None:
    # docs/views.md: proportions are relative weights, 0.7 and 0.6 as 7 and 6
    a, b = two
    da, db = ParquetDataset(a), ParquetDataset(b)
    for weights in ((0.7, 0.6), (7, 6)):
        mix = Mixture([Stream(da, proportion=weights[0]), Stream(db, proportion=weights[1])],
                      epoch_size=130)
        assert mix.counts == [70, 60] and len(mix) == 130
