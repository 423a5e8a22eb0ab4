"""A DataLoader worker's batch reaches the main process as one shared-memory block."""

from __future__ import annotations

import functools
import itertools
from collections import OrderedDict, UserDict, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support import datagen
from torch.utils.data import DataLoader, Dataset, default_collate

from undertale_duck import ArgumentError, ChunkedSampler, ParquetDataset, collate, load, one_block
from undertale_duck.training.one_block import ALIGN

SIZES = [70, 45, 64]
TOTAL = sum(SIZES)
BATCH = 16
COLUMNS = ["id", "label", "tokens", "point"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("one-block")
    datagen.write_shards(path, SIZES, row_group_size=32)
    return path


def tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor of a batch's dicts, lists and tuples, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, Mapping):
        return [t for item in value.values() for t in tensors(item)]
    if isinstance(value, list | tuple):
        return [t for item in value for t in tensors(item)]
    return []


def storages(batch: Any) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors(batch)}


def assert_one_block(moved: list[torch.Tensor]) -> None:
    """``moved`` share one shared storage, apart, aligned, contiguous and writable."""
    assert len({t.untyped_storage().data_ptr() for t in moved}) == 1
    base = moved[0].untyped_storage().data_ptr()
    spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in moved)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start  # no two overlap: a write to one never shows in another
    for t in moved:
        assert t.is_shared() and t.is_contiguous()
        assert (t.data_ptr() - base) % ALIGN == 0
    before = [t.clone() for t in moved]
    moved[0].view(-1)[0] = 0 if moved[0].dtype == torch.bool else 1
    for t, old in zip(moved[1:], before[1:], strict=True):
        assert torch.equal(t, old)


def check_rows(batch: dict[str, Any]) -> list[int]:
    """The batch's global row indices, every value checked against its index."""
    rows = [int(i[4:]) for i in batch["id"]]
    assert batch["label"].tolist() == [i % 7 for i in rows]
    assert batch["point"]["x"].tolist() == rows
    mask = batch["tokens_mask"]
    for k, i in enumerate(rows):
        assert batch["tokens"][k][mask[k]].tolist() == datagen.row(i)["tokens"]
    return rows


def plain_epoch(root: Path, workers: int, collate_fn: Any, context: str | None = None) -> list[Any]:
    ds = ParquetDataset(root, columns=COLUMNS, format="torch")
    sampler = ChunkedSampler(ds, BATCH, workers, drop_last=False)
    return list(DataLoader(ds, batch_size=BATCH, sampler=sampler, collate_fn=collate_fn,
                           num_workers=workers, multiprocessing_context=context))


@pytest.mark.parametrize("workers", [1, 2])
def test_collate_in_workers_hands_each_batch_as_one_block(root: Path, workers: int) -> None:
    batches = plain_epoch(root, workers, collate, "fork")
    seen = []
    for batch in batches:
        seen += check_rows(batch)
        assert_one_block(tensors(batch))
        assert len(tensors(batch)) == 4  # label, tokens, its mask, point's x
    assert sorted(seen) == list(range(TOTAL))


def test_collate_one_block_false_leaves_each_tensor_to_torch(root: Path) -> None:
    batches = plain_epoch(root, 2, functools.partial(collate, one_block=False), "fork")
    seen = []
    for batch in batches:
        seen += check_rows(batch)
        assert len(storages(batch)) == len(tensors(batch)) == 4
    assert sorted(seen) == list(range(TOTAL))


def test_collate_without_workers_is_unchanged(root: Path) -> None:
    batches = plain_epoch(root, 0, collate)
    seen = []
    for batch in batches:
        seen += check_rows(batch)
        assert len(storages(batch)) == 4
        assert not any(t.is_shared() for t in tensors(batch))
    assert sorted(seen) == list(range(TOTAL))


def test_spawned_workers_hand_one_block(root: Path) -> None:
    batches = plain_epoch(root, 1, collate, "spawn")
    assert sorted(i for batch in batches for i in check_rows(batch)) == list(range(TOTAL))
    for batch in batches:
        assert_one_block(tensors(batch))


def write_structs(path: Path, count: int) -> Path:
    pq.write_table(pa.table({
        "label": pa.array([i % 5 for i in range(count)], pa.int64()),
        "s": pa.array([{"a": i, "b": i / 2, "c": f"c{i}"} for i in range(count)]),
    }), path, row_group_size=20)
    return path


def test_a_structs_fields_join_the_batchs_block(tmp_path: Path) -> None:
    count = 50
    write_structs(tmp_path / "structs.parquet", count)
    ds = ParquetDataset(tmp_path / "structs.parquet", format="torch")
    loader = DataLoader(ds, batch_size=8, num_workers=1, multiprocessing_context="fork",
                        sampler=ChunkedSampler(ds, 8, 1, drop_last=False), collate_fn=collate)
    seen = []
    for batch in loader:
        rows = batch["s"]["a"].tolist()
        assert batch["s"]["b"].tolist() == [i / 2 for i in rows]
        assert batch["s"]["c"] == [f"c{i}" for i in rows]
        assert batch["label"].tolist() == [i % 5 for i in rows]
        assert_one_block(tensors(batch))  # the struct's tensors in the batch's one block
        assert len(tensors(batch)) == 3
        seen += rows
    assert sorted(seen) == list(range(count))


def test_a_collator_sent_to_spawned_workers_is_wrapped_too(tmp_path: Path) -> None:
    # torch's default_collate stands for a user's module-level collator: pickled to spawn
    path = write_structs(tmp_path / "structs.parquet", 40)
    loader = load(path, None, default_collate, 8, workers=1, drop_last=False,
                  multiprocessing_context="spawn")
    seen = []
    for batch in loader:
        rows = batch["s"]["a"].tolist()
        assert batch["s"]["b"].tolist() == [i / 2 for i in rows]
        assert batch["label"].tolist() == [i % 5 for i in rows]
        assert_one_block(tensors(batch))
        seen += rows
    assert sorted(seen) == list(range(40))


def as_tuple(rows: list[dict[str, Any]]) -> Any:
    """A user's collator: labels, a nested dict and a list, the ids as strings."""
    labels = torch.tensor([row["label"] for row in rows])
    ids = torch.tensor([int(row["id"][4:]) for row in rows])
    return (ids, {"label": labels, "twice": [labels * 2, (ids * 3).to(torch.float32)]},
            [row["id"] for row in rows])


def check_tuple(batch: Any) -> list[int]:
    ids, inner, names = batch
    rows = ids.tolist()
    assert names == [f"row-{i:08d}" for i in rows]
    assert inner["label"].tolist() == [i % 7 for i in rows]
    assert inner["twice"][0].tolist() == [2 * (i % 7) for i in rows]
    assert inner["twice"][1].tolist() == [3.0 * i for i in rows]
    return rows


@pytest.mark.parametrize("shuffle", [False, True])
def test_load_places_a_users_collators_batches_in_one_block(root: Path, shuffle: bool) -> None:
    loader = load(root, None, as_tuple, BATCH, workers=2, shuffle=shuffle, drop_last=False,
                  multiprocessing_context="fork")
    seen = []
    for batch in loader:
        seen += check_tuple(batch)
        assert_one_block(tensors(batch))
        assert len(tensors(batch)) == 4
    assert sorted(seen) == list(range(TOTAL))


def as_encoding(rows: list[dict[str, Any]]) -> Encoding:
    """A user's collator returning a tokenizer's kind of batch (a ``UserDict``)."""
    ids = torch.tensor([int(row["id"][4:]) for row in rows])
    return Encoding({"input_ids": ids[:, None] + torch.arange(3), "labels": ids % 7}, len(rows))


def test_load_places_a_tokenizers_batch_in_one_block(root: Path) -> None:
    loader = load(root, None, as_encoding, BATCH, workers=2, shuffle=True, drop_last=False,
                  multiprocessing_context="fork")
    seen = []
    for batch in loader:
        assert type(batch) is Encoding and batch.sequences == len(batch["labels"])
        rows = batch.input_ids[:, 0].tolist()
        assert batch.input_ids.tolist() == [[i, i + 1, i + 2] for i in rows]
        assert batch.labels.tolist() == [i % 7 for i in rows]
        assert_one_block([batch.input_ids, batch.labels])
        seen += rows
    assert sorted(seen) == list(range(TOTAL))


def test_load_one_block_false(root: Path) -> None:
    loader = load(root, None, as_tuple, BATCH, workers=2, drop_last=False,
                  multiprocessing_context="fork", one_block=False)
    for batch in loader:
        check_tuple(batch)
        assert len(storages(batch)) == 4
    loader = load(root, None, collate, BATCH, workers=1, drop_last=False, format="torch",
                  columns=COLUMNS, multiprocessing_context="fork", one_block=False)
    for batch in loader:
        check_rows(batch)
        assert len(storages(batch)) == 4
    loader = load(root, None, collate, BATCH, workers=1, drop_last=False, format="torch",
                  columns=COLUMNS, multiprocessing_context="fork")
    for batch in loader:
        check_rows(batch)
        assert_one_block(tensors(batch))


def test_load_without_workers_does_not_wrap_the_collator(root: Path) -> None:
    loader = load(root, None, as_tuple, BATCH, drop_last=False)
    assert loader.collate_fn is as_tuple
    for batch in loader:
        check_tuple(batch)
        assert len(storages(batch)) == 4


def aliased(rows: list[int]) -> dict[str, Any]:
    base = torch.arange(10) + rows[0]
    shared = torch.full((3,), rows[0])
    return {
        "whole": base, "tail": base[4:],  # one storage: kept, its aliasing with it
        "a": torch.ones(5) * rows[0], "b": torch.zeros(2, 2, dtype=torch.int16),
        "p": shared, "q": shared,  # the same tensor twice: kept
        "pre": (torch.arange(4) + rows[0]).share_memory_(),  # in shared memory already: kept
    }


class Indices(Dataset[int]):
    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> int:
        return index


def in_a_worker(make: Any, count: int) -> DataLoader[int]:
    """Batches of two indices made by ``make`` in a forked worker and placed by one_block."""
    return DataLoader(Indices(count), batch_size=2, num_workers=1, multiprocessing_context="fork",
                      collate_fn=lambda rows: one_block(make(rows)))


def block_bytes(moved: list[torch.Tensor]) -> int:
    """The size of a block holding ``moved`` in this order, each at an ALIGN boundary."""
    size = 0
    for t in moved:
        size = -(-size // ALIGN) * ALIGN + t.numel() * t.element_size()
    return size


def test_tensors_sharing_storage_keep_it() -> None:
    loader = in_a_worker(aliased, 6)
    for k, batch in enumerate(loader):
        start = 2 * k
        assert batch["whole"].tolist() == list(range(start, start + 10))
        assert batch["tail"].tolist() == list(range(start + 4, start + 10))
        assert batch["tail"].data_ptr() == batch["whole"].data_ptr() + 4 * 8
        batch["whole"][5] = -1
        assert batch["tail"][1] == -1  # still one storage
        assert batch["p"].data_ptr() == batch["q"].data_ptr()
        assert batch["p"].tolist() == [start] * 3
        assert batch["a"].tolist() == [float(start)] * 5
        assert batch["b"].tolist() == [[0, 0], [0, 0]]
        assert_one_block([batch["a"], batch["b"]])
        block = batch["a"].untyped_storage().data_ptr()
        assert batch["pre"].tolist() == list(range(start, start + 4))
        for key in ("whole", "p", "pre"):
            assert batch[key].untyped_storage().data_ptr() != block


def left_alone(rows: list[int]) -> dict[str, Any]:
    start = rows[0]
    return {
        "grad": torch.ones(3, requires_grad=True),
        "param": torch.nn.Parameter(torch.full((2,), float(start)), requires_grad=False),
        "empty": torch.empty(0, 4),
        "sparse": torch.eye(3).to_sparse(),
        "one": torch.arange(4) + start,
        "two": torch.arange(3, dtype=torch.float64) * start,
        "deep": {"list": [(torch.tensor([start, start]),)]},
    }


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_what_cannot_move_is_left_to_torch() -> None:
    loader = in_a_worker(left_alone, 4)
    for k, batch in enumerate(loader):
        start = 2 * k
        assert batch["grad"].requires_grad and batch["grad"].tolist() == [1.0] * 3
        assert type(batch["param"]) is torch.nn.Parameter
        assert batch["param"].tolist() == [float(start)] * 2
        assert batch["empty"].shape == (0, 4)
        assert batch["sparse"].is_sparse and torch.equal(batch["sparse"].to_dense(), torch.eye(3))
        assert batch["one"].tolist() == [start + i for i in range(4)]
        assert batch["two"].tolist() == [0.0, float(start), 2.0 * start]
        assert batch["deep"]["list"][0][0].tolist() == [start, start]
        moved = [batch["one"], batch["two"], batch["deep"]["list"][0][0]]
        assert_one_block(moved)
        block = moved[0].untyped_storage().data_ptr()
        for key in ("grad", "param"):
            assert batch[key].untyped_storage().data_ptr() != block


def awkward(rows: list[int]) -> dict[str, Any]:
    start = rows[0]
    c = torch.tensor([1 + 2j, 3 - start * 1j])
    x = torch.arange(4.0, requires_grad=True)
    return {
        "nested": torch.nested.nested_tensor([torch.arange(r + 1.0) for r in rows]),
        "mask": torch.ones(16, 16, dtype=torch.bool).tril().expand(len(rows), 1, 16, 16),
        "c": c, "cc": c.conj(),  # a conjugate view beside its storage's other tensor
        "x": x, "y": x.detach(),  # y shares x's storage; x cannot move, so y stays with it
        "a": torch.arange(3) + start, "b": torch.ones(2) * start,
    }


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_what_torch_would_get_wrong_or_copy_whole_is_handled() -> None:
    loader = in_a_worker(awkward, 4)
    for k, batch in enumerate(loader):
        start = 2 * k
        nested = batch["nested"]  # left to torch: a nested tensor has no one shape
        assert nested.is_nested
        assert [t.tolist() for t in nested.unbind()] == [
            [float(i) for i in range(r + 1)] for r in (start, start + 1)]
        mask = batch["mask"]  # left to torch: written out it would be 2 x 256 bytes
        assert mask.shape == (2, 1, 16, 16) and mask.untyped_storage().nbytes() == 256
        assert torch.equal(mask[1, 0], torch.ones(16, 16, dtype=torch.bool).tril())
        assert batch["c"].tolist() == [1 + 2j, 3 - start * 1j]
        assert batch["cc"].tolist() == [1 - 2j, 3 + start * 1j]  # moved, so resolved
        assert batch["x"].requires_grad and batch["x"].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert batch["y"].untyped_storage().data_ptr() == batch["x"].untyped_storage().data_ptr()
        moved = [batch["cc"], batch["a"], batch["b"]]
        assert_one_block(moved)
        assert batch["a"].tolist() == [start, start + 1, start + 2]
        assert batch["b"].tolist() == [float(start)] * 2
        # the block holds these and nothing else
        assert moved[0].untyped_storage().nbytes() == block_bytes(moved)


def views(rows: list[int]) -> Any:
    start = float(rows[0])
    z = torch.tensor([1 + 2j, 3 - start * 1j])
    return [z.conj()] if start else {"conj": z.conj(), "neg": z.clone().conj().imag}


def test_conjugate_and_negative_views_arrive_resolved() -> None:
    # torch alone hands a worker's conj()/neg views over without their bit (wrong values)
    loader = in_a_worker(views, 4)
    first, second = list(loader)
    assert first["conj"].tolist() == [1 - 2j, 3 + 0j]
    assert first["neg"].tolist() == [-2.0, 0.0]
    assert_one_block([first["conj"], first["neg"]])
    assert second[0].tolist() == [1 - 2j, 3 + 2j]  # alone, moved all the same
    assert second[0].is_shared() and not second[0].is_conj()


class Encoding(UserDict[str, Any]):
    """Like Hugging Face's ``BatchEncoding``: a ``UserDict`` with its own state and keys as
    attributes."""

    def __init__(self, data: dict[str, Any], sequences: int) -> None:
        super().__init__(data)
        self.sequences = sequences

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["data"][name]
        except KeyError:
            raise AttributeError(name) from None


class Pair(NamedTuple):
    ids: torch.Tensor
    extra: dict[str, Any]


class Tagged(list[Any]):
    tag = "class"


class Needs(dict[str, Any]):
    """A dict subclass whose constructor takes a required argument."""

    def __init__(self, name: str, items: dict[str, Any]) -> None:
        super().__init__(items)
        self.name = name


class Stubborn(dict[str, Any]):
    def __copy__(self) -> Any:
        raise TypeError("not copied")


class Plain(tuple[Any, ...]):
    """A tuple type that is not a named tuple."""


def containers(rows: list[int]) -> dict[str, Any]:
    start = rows[0]
    ids = torch.arange(4) + start
    inner = [torch.full((2,), start), torch.ones(3) * start]
    tagged = Tagged([torch.arange(3) * start, "text"])
    tagged.tag = f"t{start}"
    counts: defaultdict[str, Any] = defaultdict(list, {"c": torch.tensor([start, 1])})
    loop: list[Any] = [torch.arange(2) + start]
    loop.append(loop)  # a list holding itself: walked as deep as the limit, then left
    return {
        "ordered": OrderedDict([("z", ids * 2), ("a", torch.zeros(2, 2))]),
        "default": counts,
        "encoding": Encoding({"input_ids": ids.reshape(2, 2), "mask": ids > start}, 2),
        "pair": Pair(ids + 1, {"deep": (ids.to(torch.float64),)}),
        "tagged": tagged,
        "needs": Needs(f"n{start}", {"x": ids * 5}),
        "stubborn": Stubborn({"s": ids * 7}),
        "plain": Plain((ids * 11,)),
        "twice": [inner, inner],  # one list twice: its tensors stay apart, the list one
        "empty": OrderedDict(),
        "loop": loop,
    }


def test_subclassed_containers_are_rebuilt_as_themselves() -> None:
    loader = in_a_worker(containers, 6)
    for k, batch in enumerate(loader):
        start = 2 * k
        ids = [start + i for i in range(4)]
        ordered, default, encoding = batch["ordered"], batch["default"], batch["encoding"]
        assert type(ordered) is OrderedDict and list(ordered) == ["z", "a"]
        assert ordered["z"].tolist() == [2 * i for i in ids]
        assert ordered["a"].tolist() == [[0.0, 0.0], [0.0, 0.0]]
        assert type(default) is defaultdict and default.default_factory is list
        assert default["c"].tolist() == [start, 1] and default["new"] == []
        assert type(encoding) is Encoding and encoding.sequences == 2
        assert encoding.input_ids.tolist() == [ids[:2], ids[2:]]
        assert encoding["mask"].tolist() == [False, True, True, True]
        pair = batch["pair"]
        assert type(pair) is Pair and pair.ids.tolist() == [i + 1 for i in ids]
        assert pair.extra["deep"][0].dtype == torch.float64
        assert pair.extra["deep"][0].tolist() == [float(i) for i in ids]
        tagged = batch["tagged"]
        assert type(tagged) is Tagged and tagged.tag == f"t{start}"
        assert tagged[0].tolist() == [0, start, 2 * start] and tagged[1] == "text"
        needs = batch["needs"]
        assert type(needs) is Needs and needs.name == f"n{start}"
        assert needs["x"].tolist() == [5 * i for i in ids]
        assert type(batch["stubborn"]) is Stubborn
        assert batch["stubborn"]["s"].tolist() == [7 * i for i in ids]
        assert type(batch["plain"]) is Plain and batch["plain"][0].tolist() == [11 * i for i in ids]
        first, second = batch["twice"]
        assert first is second and first[0].tolist() == [start, start]
        assert type(batch["empty"]) is OrderedDict and not batch["empty"]
        assert batch["loop"][1] is batch["loop"] and batch["loop"][0].tolist() == [start, start + 1]
        moved = [ordered["z"], ordered["a"], default["c"], encoding["input_ids"],
                 encoding["mask"], pair.ids, pair.extra["deep"][0], tagged[0], needs["x"]]
        assert_one_block(moved)
        # the block holds these, and the refused copy's tensor, and nothing else
        size = block_bytes([*moved, batch["stubborn"]["s"]])
        assert moved[0].untyped_storage().nbytes() == size
        block = moved[0].untyped_storage().data_ptr()
        # not copied (a refused copy, another tuple type, one list twice): torch moves them
        for kept in (batch["stubborn"]["s"], batch["plain"][0], first[0], first[1]):
            assert kept.untyped_storage().data_ptr() != block


def test_outside_a_worker_the_batch_is_returned_as_is() -> None:
    batch = {"a": torch.arange(3), "b": [torch.ones(2)]}
    assert one_block(batch) is batch
    assert not batch["a"].is_shared()


DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64]


def structure(seed: int) -> Any:
    """A batch-like structure of tensors of many dtypes and shapes, a function of ``seed``."""
    rng = np.random.default_rng(seed)

    def tensor() -> torch.Tensor:
        dtype = DTYPES[int(rng.integers(len(DTYPES)))]
        shape = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(0, 4))))
        values = torch.from_numpy(np.asarray(rng.normal(size=shape) * 50, np.float64))
        t = (values > 0) if dtype == torch.bool else values.to(dtype)
        if t.dim() >= 2 and rng.integers(2):
            t = t.transpose(0, 1)  # not contiguous
        elif t.dim() >= 1 and t.shape[0] > 2 and rng.integers(2):
            t = t[::2]  # a strided view of its own storage
        return t

    def value(depth: int) -> Any:
        kind = int(rng.integers(7 if depth < 3 else 2))
        if kind == 0:
            return tensor()
        if kind == 1:
            return f"s{int(rng.integers(100))}"
        items = [value(depth + 1) for _ in range(int(rng.integers(0, 4)))]
        if kind == 2:
            return {f"k{i}": item for i, item in enumerate(items)}
        if kind == 5:
            return OrderedDict((f"o{i}", item) for i, item in enumerate(items))
        if kind == 6:
            return Tagged(items)
        return items if kind == 3 else tuple(items)

    return {"top": value(0), "more": [value(1), value(1)]}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a, b))
    if isinstance(a, dict):
        return type(b) is type(a) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(
            same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


class Structures(Dataset[Any]):
    def __init__(self, seeds: list[int]) -> None:
        self.seeds = seeds

    def __len__(self) -> int:
        return len(self.seeds)

    def __getitem__(self, index: int) -> Any:
        return one_block(structure(self.seeds[index]))


@settings(max_examples=6, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=25))
def test_any_structure_arrives_whole_in_one_block(seeds: list[int]) -> None:
    loader = DataLoader(Structures(seeds), batch_size=None, num_workers=1,
                        multiprocessing_context="fork", collate_fn=lambda item: item)
    for seed, got in zip(seeds, loader, strict=True):
        assert same(structure(seed), got)
        moved = tensors(got)
        if len(moved) >= 2:
            assert_one_block(moved)


def test_bad_one_block_is_refused(root: Path) -> None:
    with pytest.raises(ArgumentError, match="one_block must be True or False"):
        collate([{"a": 1}], one_block="yes")  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="one_block must be True or False"):
        load(root, None, collate, BATCH, one_block=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("block", [True, False])
def test_datamodule_passes_one_block_to_its_loaders(root: Path, block: bool) -> None:
    from undertale_duck import DataModule

    dm = DataModule(root, root, None, as_tuple, BATCH, 1, shuffle=False, drop_last=False,
                    multiprocessing_context="fork", one_block=block)
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        seen = []
        for batch in loader:
            seen += check_tuple(batch)
            if block:
                assert_one_block(tensors(batch))
            else:
                assert len(storages(batch)) == 4
        assert sorted(seen) == list(range(TOTAL))


def test_torchdatas_stateful_loader_gets_one_block_and_resumes(root: Path) -> None:
    StatefulDataLoader = pytest.importorskip("torchdata.stateful_dataloader").StatefulDataLoader

    def make() -> Any:
        ds = ParquetDataset(root, columns=COLUMNS, format="torch")
        sampler = ChunkedSampler(ds, BATCH, 2, shuffle=True, drop_last=False)
        return StatefulDataLoader(ds, batch_size=BATCH, sampler=sampler, collate_fn=collate,
                                  num_workers=2, multiprocessing_context="fork")

    loader = make()
    it = iter(loader)
    seen = []
    for _ in range(4):
        batch = next(it)
        seen += check_rows(batch)
        assert_one_block(tensors(batch))
    state = loader.state_dict()
    del it
    resumed = make()
    resumed.load_state_dict(state)
    for batch in resumed:
        seen += check_rows(batch)
        assert_one_block(tensors(batch))
    assert sorted(seen) == list(range(TOTAL))  # each row once across the resume
