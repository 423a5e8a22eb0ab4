from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support import datagen
from torch.utils.data import get_worker_info

from undertale_duck import (
    ArgumentError,
    ChunkedSampler,
    Mixture,
    ParquetDataset,
    SchemaError,
    load,
)
from undertale_duck import schema as schemas
from undertale_duck.training.loader import ChunkedLoader, default_start_method
from undertale_duck.training.order import worker_windows


class Rows(schemas.Dataset):
    """The generated rows: a unique id and an integer label."""

    label: int


def ids(rows: list[dict[str, Any]]) -> list[int]:
    return [int(r["id"][4:]) for r in rows]


def tensors(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    return {
        "index": torch.tensor([int(r["id"][4:]) for r in rows]),
        "label": torch.tensor([r["label"] for r in rows]),
    }


def test_load_reads_rows_in_the_seed_order(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    loader = load(root, Rows, None, 7, memory=1)
    assert isinstance(loader, ChunkedLoader)
    assert isinstance(loader.sampler, ChunkedSampler)
    batches = list(loader)
    assert [len(b) for b in batches][:3] == [7, 7, 7]
    rows = [r for b in batches for r in b]
    assert rows == datagen.expected(total)


def test_collator_and_tensors(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    loader = load(root, Rows, tensors, 64)
    batch = next(iter(loader))
    assert batch["index"].tolist() == list(range(64))
    assert batch["label"].tolist() == [i % 7 for i in range(64)]


def test_schema_mismatch_raises_schema_error(uneven: tuple[Path, int]) -> None:
    root, _ = uneven
    with pytest.raises(SchemaError, match="mask"):
        load(root, schemas.TokenizedDataset, ids, 8)


def test_schema_none_skips_validation(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    loader = load(root, None, ids, 100)
    assert [i for b in loader for i in b] == list(range(total))


def test_options_pass_through(uneven: tuple[Path, int]) -> None:
    root, _ = uneven
    loader = load(root, None, ids, 8, workers=2, pin_memory=True, persistent_workers=True,
                  prefetch_factor=3, shuffle=True, seed=4, mix=2, columns=["id"])
    assert loader.pin_memory and loader.persistent_workers
    assert loader.prefetch_factor == 3 and loader.num_workers == 2
    assert loader.multiprocessing_context.get_start_method() == default_start_method() == "fork"
    sampler = loader.sampler
    assert isinstance(sampler, ChunkedSampler)
    assert (sampler.shuffle, sampler.seed, sampler.mix, sampler.workers) == (True, 4, 2, 2)
    assert isinstance(loader.dataset, ParquetDataset) and loader.dataset.columns == ["id"]
    spawn = load(root, None, ids, 8, workers=1, multiprocessing_context="spawn")
    assert spawn.multiprocessing_context.get_start_method() == "spawn"


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"prefetch_factor": 2}, "workers"),
        ({"persistent_workers": True}, "workers"),
        ({"workers": 1, "prefetch_factor": 0}, "prefetch_factor"),
        ({"workers": 1, "multiprocessing_context": "teleport"}, "multiprocessing_context"),
        ({"workers": -1}, "workers"),
        ({"batch": 0}, "batch"),
    ],
)
def test_bad_options(uneven: tuple[Path, int], kwargs: dict[str, Any], word: str) -> None:
    root, _ = uneven
    args: dict[str, Any] = {"batch": 8, **kwargs}
    with pytest.raises(ArgumentError, match=word):
        load(root, None, ids, **args)


def test_prefetch_factor_is_checked_as_every_integer_is(uneven: tuple[Path, int]) -> None:
    # a numpy integer (from a config computed with numpy) was refused, unlike batch= or seed=
    root, _ = uneven
    loader = load(root, None, ids, 8, workers=1, prefetch_factor=np.int64(3))
    assert loader.prefetch_factor == 3 and type(loader.prefetch_factor) is int
    with pytest.raises(ArgumentError, match="prefetch_factor must be an integer >= 1, got True"):
        load(root, None, ids, 8, workers=1, prefetch_factor=True)


def test_workers_after_parent_used_the_dataset(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    ds = ParquetDataset(root, memory=1)
    assert ds[3]["id"] == "row-00000003"
    loader = load(ds, Rows, ids, 10, workers=2)
    seen = [i for b in loader for i in b]
    assert sorted(seen) == list(range(total))  # 550 = 2 x 275: nothing dropped
    assert seen[:10] == list(range(10)) and seen[10:20] == list(range(275, 285))
    assert ds[-1]["id"] == f"row-{total - 1:08d}"


def test_persistent_workers_epochs_differ_and_cover(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    loader = load(root, None, ids, 16, workers=2, persistent_workers=True, shuffle=True, seed=1)
    sampler = loader.sampler
    assert isinstance(sampler, ChunkedSampler)
    epochs = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        epochs.append([i for b in loader for i in b])
        assert epochs[-1] == sampler.order(epoch).tolist()
        assert sorted(epochs[-1]) == list(range(total))
    assert epochs[0] != epochs[1]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("stop_after", [1, 5, 17])
def test_resume_mid_epoch(uneven: tuple[Path, int], workers: int, stop_after: int) -> None:
    root, total = uneven

    def make() -> ChunkedLoader:
        return load(root, None, ids, 16, workers=workers, shuffle=True, seed=3, memory=1)

    first = make()
    sampler = first.sampler
    assert isinstance(sampler, ChunkedSampler)
    sampler.set_epoch(1)
    expected = sampler.order(1).tolist()
    seen: list[int] = []
    for batch in itertools.islice(first, stop_after):
        seen.extend(batch)
    state = first.state_dict()  # workers have prefetched more than was consumed
    assert state["epoch"] == 1 and state["consumed"] == len(seen) == 16 * stop_after
    del first

    second = make()
    second.load_state_dict(state)
    rest = [i for b in second for i in b]
    assert seen + rest == expected  # no repeats, no skips, same order
    assert second.state_dict()["consumed"] == len(expected)
    # the epoch after is whole and different
    after = make()
    after.load_state_dict(second.state_dict())
    next_epoch = [i for b in after for i in b]
    assert sorted(next_epoch) == list(range(total)) and next_epoch != expected


@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_at_an_epochs_end_then_its_epoch_set_again_serves_nothing_twice(
        uneven: tuple[Path, int], workers: int) -> None:
    # the resume pattern of docs/resume.md (set the saved epoch again after loading) with a
    # state saved after the epoch's last batch replayed the whole epoch; torchdata's
    # StatefulDataLoader serves nothing more of it, and now so does the library's loader
    root, total = uneven

    def make() -> ChunkedLoader:
        return load(root, None, ids, 16, workers=workers, shuffle=True, seed=3, memory=1)

    first = make()
    first.sampler.set_epoch(1)
    whole = [i for b in first for i in b]
    state = first.state_dict()
    assert state["epoch"] == 1 and state["consumed"] == len(whole)
    second = make()
    second.load_state_dict(state)
    second.sampler.set_epoch(state["epoch"])
    assert [i for b in second for i in b] == []
    assert second.state_dict()["epoch"] == 1  # still at that epoch's end
    second.sampler.set_epoch(2)
    assert [i for b in second for i in b] == first.sampler.order(2).tolist()


def test_state_of_a_fresh_loader_resumes_from_the_start(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    loader = load(root, None, ids, 50)
    state = loader.state_dict()
    assert state["consumed"] == 0 and state["epoch"] == 0
    again = load(root, None, ids, 50)
    again.load_state_dict(state)
    assert [i for b in again for i in b] == list(range(total))


def _ids_worker_reads(rows: list[dict[str, Any]]) -> tuple[list[int], int, int]:
    info = get_worker_info()
    assert info is not None
    dataset = info.dataset
    assert isinstance(dataset, ParquetDataset)
    dataset.reader.ahead.settle()  # no race with the worker's read-ahead thread
    return ids(rows), info.id, dataset.reader.read_ahead_stats["read"]


def _mark(directory: Path) -> Callable[[int], None]:
    def init(worker_id: int) -> None:
        (directory / f"worker-{worker_id}").write_text("started")

    return init


def test_shuffled_workers_get_their_window_order(uneven: tuple[Path, int],
                                                 tmp_path: Path) -> None:
    root, total = uneven
    loader = load(root, None, _ids_worker_reads, 8, workers=2, shuffle=True, seed=6,
                  window_bytes=2000, worker_init_fn=_mark(tmp_path))
    sampler = loader.sampler
    assert isinstance(sampler, ChunkedSampler) and isinstance(loader.dataset, ParquetDataset)
    sampler.set_epoch(1)
    batches = list(loader)
    assert [i for b, _, _ in batches for i in b] == sampler.order(1).tolist()
    assert [w for _, w, _ in batches] == [k % 2 for k in range(len(batches))]
    # each worker read windows ahead of use (the shuffled order is not sequential)
    assert max(r for _, w, r in batches if w == 0) > 0
    assert max(r for _, w, r in batches if w == 1) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker-0", "worker-1"]


def test_worker_windows_follow_the_round_robin() -> None:
    starts = [0, 10, 20, 30]
    order = np.array([25, 21, 5, 0, 31, 39, 12, 13, 3, 22, 35, 36])
    # batches of 2: w0 gets [25 21] [31 39] [3 22]; w1 gets [5 0] [12 13] [35 36]
    assert worker_windows(order, starts, 2, 2) == [[2, 3, 0], [0, 1, 3]]
    assert worker_windows(order, starts, 4, 0) == [[2, 0, 3, 1]]


def test_shuffled_epoch_in_main_process_reads_ahead(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    loader = load(root, None, ids, 8, shuffle=True, seed=2, window_bytes=2000, memory=1)
    sampler = loader.sampler
    assert isinstance(sampler, ChunkedSampler) and isinstance(loader.dataset, ParquetDataset)
    reader = loader.dataset.reader
    seen = []
    for batch in loader:
        seen += batch
        # the windows hinted so far are read before the next batch asks for them: what is
        # checked is that the shuffled order was read ahead, not which thread ran first
        reader.ahead.settle()
    assert seen == sampler.order(0).tolist()
    assert reader.read_ahead_stats["read"] > 0


@pytest.mark.parametrize("workers", [0, 2])
def test_evaluation_loaders_over_ranks_cover_every_row_once(uneven: tuple[Path, int],
                                                            workers: int) -> None:
    root, total = uneven
    seen = []
    for rank in range(3):
        loader = load(root, None, ids, 7, workers=workers, ranks=3, rank=rank, drop_last=False)
        seen += [i for batch in loader for i in batch]
    assert sorted(seen) == list(range(total))
    trained = [i for rank in range(3)
               for batch in load(root, None, ids, 7, ranks=3, rank=rank) for i in batch]
    assert len(trained) == len(set(trained)) == total - total % 3  # the tail rule for training


def test_a_loader_state_resumes_with_other_workers_and_batch(uneven: tuple[Path, int]) -> None:
    root, total = uneven
    first = load(root, None, ids, 8, workers=2, shuffle=True, seed=6)
    it = iter(first)
    seen = [i for _ in range(5) for i in next(it)]
    state = first.state_dict()
    del it
    second = load(root, None, ids, 5, workers=0, shuffle=True, seed=6)
    second.load_state_dict(state)
    rest = [i for batch in second for i in batch]
    assert sorted(seen + rest) == list(range(total))  # one rank, no workers: nothing left out
    assert len(second) == 5 + len(rest) // 5 + (len(rest) % 5 > 0)  # batches before + the rest
    second.sampler.set_epoch(1)
    assert [i for batch in second for i in batch] == second.sampler.order(1).tolist()


def test_a_shuffled_state_over_other_windows_is_refused(uneven: tuple[Path, int]) -> None:
    # the shuffled sequence permutes the windows: the same rows cut into other windows
    # (window_bytes=, or memory= which sets its default) give another sequence, so the saved
    # position would serve rows twice and skip others. The fingerprint (the data) is equal.
    root, total = uneven
    first = load(root, None, ids, 8, shuffle=True, seed=2)
    it = iter(first)
    seen = [i for _ in range(6) for i in next(it)]
    state = first.state_dict()
    del it
    other = load(root, None, ids, 8, shuffle=True, seed=2, window_bytes=200)
    assert len(other.dataset.windows) != len(first.dataset.windows)
    assert other.dataset.fingerprint == state["data"]
    with pytest.raises(ArgumentError, match="window_bytes"):
        other.load_state_dict(state)
    same = load(root, None, ids, 8, shuffle=True, seed=2)  # the same windows resume exactly
    same.load_state_dict(state)
    rest = [i for batch in same for i in batch]
    assert sorted(seen + rest) == list(range(total))
    # without shuffle the sequence is the rows in order, whatever the windows
    plain = load(root, None, ids, 8)
    it = iter(plain)
    head = [i for _ in range(3) for i in next(it)]
    narrow = load(root, None, ids, 8, window_bytes=200)
    narrow.load_state_dict(plain.state_dict())
    assert head + [i for batch in narrow for i in batch] == list(range(total))
    # check_data=False takes the saved position anyway, as for other data
    lenient = load(root, None, ids, 8, shuffle=True, seed=2, window_bytes=200, check_data=False)
    lenient.load_state_dict(state)
    assert lenient.sampler.resume_at == 48


def test_an_open_dataset_with_a_view_option_is_refused(uneven: tuple[Path, int]) -> None:
    # load() opens no dataset then: a where=/query=/tables= was ignored, and the loader
    # served the rows the view leaves out
    root, total = uneven
    ds = ParquetDataset(root)
    for option in ({"where": "label <> 2"}, {"query": "SELECT id FROM dataset"},
                   {"tables": {"names": str(root / "part-00000.parquet")}}):
        name = next(iter(option))
        with pytest.raises(ArgumentError, match=f"{name}= applies when load"):
            load(ds, None, ids, 8, **option)  # type: ignore[arg-type]
    assert sorted(i for batch in load(ds, None, ids, 8, drop_last=False) for i in batch) == list(
        range(total))


def test_an_open_dataset_serves_only_its_own_columns_and_format(uneven: tuple[Path, int]) -> None:
    # load(open dataset, format="numpy") served python rows and columns= served every column,
    # silently: the collator got rows it was not written for
    root, total = uneven
    ds = ParquetDataset(root, columns=["id"], format="torch")
    mixed = Mixture([ds, ParquetDataset(root, columns=["id"], format="torch")])
    for given in (ds, mixed):
        with pytest.raises(ArgumentError, match=r"format='numpy', but the open dataset .* serves "
                           r"format='torch'"):
            load(given, None, None, 8, format="numpy")
        with pytest.raises(ArgumentError, match=r"columns=\['id', 'label'\], but the open"):
            load(given, None, None, 8, columns=["id", "label"])
        for option in ({"storage_options": {"anon": True}}, {"cache_dir": str(root)},
                       {"retries": 2}, {"window_bytes": 100}, {"duckdb_config": {"threads": 1}},
                       {"cache_limit": "1GB"}):
            name = next(iter(option))
            with pytest.raises(ArgumentError, match=f"{name}= applies when load"):
                load(given, None, None, 8, **option)  # type: ignore[arg-type]
    # what the dataset serves is accepted as asked
    loader = load(ds, None, ids, 8, format="torch", columns=["id"], drop_last=False)
    assert sorted(i for batch in loader for i in batch) == list(range(total))
    assert list(loader.dataset[0]) == ["id"]


def test_numpy_integers_for_batch_and_workers_serve_every_row(uneven: tuple[Path, int]) -> None:
    # sizes read from a numpy config: DataLoader itself refuses a numpy batch_size
    root, total = uneven
    loader = load(root, None, ids, np.int64(7), workers=np.int64(1))
    assert loader.batch_size == 7 and type(loader.batch_size) is int
    assert [i for b in loader for i in b] == list(range(total))


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"timeout": -1}, "timeout"),
        ({"timeout": "30"}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"pin_memory": "yes"}, "pin_memory"),
        # "no" is truthy: DataLoader would keep its workers
        ({"workers": 1, "persistent_workers": "no"}, "persistent_workers"),
        ({"check_data": "no"}, "check_data"),
        ({"worker_init_fn": 5}, "worker_init_fn"),
        ({"collator": "collate"}, "collator"),
    ],
)
def test_options_torch_would_take_silently_or_fail_on_later(
    uneven: tuple[Path, int], kwargs: dict[str, Any], word: str
) -> None:
    root, _ = uneven
    args: dict[str, Any] = {"collator": ids, "batch": 8, **kwargs}
    with pytest.raises(ArgumentError, match=word):
        load(root, None, **args)


def test_spawned_workers_need_a_collator_they_can_receive(uneven: tuple[Path, int]) -> None:
    # pickle's own error would come at the first batch, from inside DataLoader
    root, total = uneven
    for method in ("spawn", "forkserver"):
        with pytest.raises(ArgumentError, match=r"collator .* module level"):
            load(root, None, lambda rows: rows, 8, workers=1, multiprocessing_context=method)
        with pytest.raises(ArgumentError, match="worker_init_fn"):
            load(root, None, ids, 8, workers=1, multiprocessing_context=method,
                 worker_init_fn=lambda worker: None)
    # fork sends nothing: a lambda is fine there, and a context object is taken as DataLoader
    # takes it
    context = multiprocessing.get_context("fork")
    loader = load(root, None, lambda rows: ids(rows), 8, workers=2,
                  multiprocessing_context=context)
    assert loader.multiprocessing_context is context
    assert sorted(i for b in loader for i in b) == list(range(total - total % 2))


def test_a_loader_state_that_is_not_a_dict_is_refused(uneven: tuple[Path, int]) -> None:
    # checkpoint.get("loader") of a checkpoint without it: None restarted the epoch quietly
    root, total = uneven
    loader = load(root, None, ids, 100)
    for bad in (None, [], ""):
        with pytest.raises(ArgumentError, match="dict from state_dict"):
            loader.load_state_dict(bad)  # type: ignore[arg-type]
    loader.load_state_dict({})  # documented: changes nothing
    assert [i for b in loader for i in b] == list(range(total))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_disk_tier_through_load_serves_a_later_run_without_decoding(
    uneven: tuple[Path, int], tmp_path: Path, workers: int
) -> None:
    root, total = uneven
    before = sorted(p.name for p in root.iterdir())
    tier = tmp_path / "tier"
    expected = datagen.expected(total)

    def epoch() -> tuple[list[dict[str, Any]], ParquetDataset]:
        loader = load(root, Rows, None, 16, workers=workers, drop_last=False, disk="64MiB",
                      disk_dir=tier, window_bytes=2000)
        rows = [r for batch in loader for r in batch]
        assert isinstance(loader.dataset, ParquetDataset)
        return rows, loader.dataset

    rows, first = epoch()
    assert sorted(rows, key=lambda r: int(r["id"][4:])) == expected
    files = sorted(p.name for p in tier.iterdir() if p.suffix == ".arrow")
    assert first.disk_dir == str(tier) and len(files) == len(first.windows)
    again, second = epoch()  # a later run: every window mapped from the files, none decoded
    assert again == rows  # the same rows in the same order
    if workers == 0:  # workers count in their own processes
        stats = second.disk_stats
        assert stats is not None and stats.writes == 0 and stats.hits > 0
    assert sorted(p.name for p in tier.iterdir() if p.suffix == ".arrow") == files
    assert sorted(p.name for p in root.iterdir()) == before  # nothing next to the data


def test_a_disk_tier_for_an_open_dataset_is_its_own(uneven: tuple[Path, int],
                                                     tmp_path: Path) -> None:
    root, _ = uneven
    ds = ParquetDataset(root)
    for options in ({"disk": 64}, {"disk_dir": tmp_path / "t"}):
        with pytest.raises(ArgumentError, match=f"{next(iter(options))}= applies when load"):
            load(ds, None, ids, 8, **options)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="disk"):
        load(root, None, ids, 8, disk="lots", disk_dir=tmp_path / "t")
    with pytest.raises(ArgumentError, match="disk_dir"):
        load(root, None, ids, 8, disk=64, disk_dir=root)  # inside the dataset: refused
