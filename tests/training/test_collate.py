from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from undertale_duck import ArgumentError, OutOfRangeError
from undertale_duck.core.rows import RowBatch
from undertale_duck.training.collate import collate


def test_fixed_length_lists_and_numbers_are_stacked() -> None:
    rows = [{"id": f"r{i}", "tokens": [i, i + 1, i + 2], "label": i % 3, "w": i / 2}
            for i in range(4)]
    batch = collate(rows)
    assert list(batch) == ["id", "tokens", "label", "w"]
    assert batch["id"] == ["r0", "r1", "r2", "r3"]
    assert batch["tokens"].tolist() == [[i, i + 1, i + 2] for i in range(4)]
    assert batch["tokens"].dtype == torch.int64
    assert batch["label"].tolist() == [0, 1, 2, 0]
    assert batch["w"].dtype == torch.float32 or batch["w"].dtype == torch.float64
    assert batch["w"].tolist() == [0.0, 0.5, 1.0, 1.5]


def test_ragged_lists_are_padded_with_a_mask() -> None:
    rows = [{"tokens": [1, 2, 3]}, {"tokens": []}, {"tokens": [7]}]
    batch = collate(rows, padding_value=-1)
    assert batch["tokens"].tolist() == [[1, 2, 3], [-1, -1, -1], [7, -1, -1]]
    assert batch["tokens_mask"].tolist() == [[True, True, True], [False] * 3,
                                             [True, False, False]]
    assert list(batch) == ["tokens", "tokens_mask"]


def test_partial_sets_options_for_a_dataloader() -> None:
    fn = functools.partial(collate, padding_value=9, mask_suffix="_valid")
    batch = fn([{"x": [1]}, {"x": [1, 2]}])
    assert batch["x"].tolist() == [[1, 9], [1, 2]]
    assert batch["x_valid"].tolist() == [[True, False], [True, True]]


def test_strings_bytes_none_and_lists_of_strings_stay_lists() -> None:
    rows = [{"s": "a", "b": b"x", "n": None, "tags": ["p", "q"], "opt": 1},
            {"s": "b", "b": b"", "n": 3, "tags": ["r"], "opt": None}]
    batch = collate(rows)
    assert batch["s"] == ["a", "b"]
    assert batch["b"] == [b"x", b""]
    assert batch["n"] == [None, 3]
    assert batch["tags"] == [["p", "q"], ["r"]]
    assert batch["opt"] == [1, None]


def test_lists_holding_none_stay_lists() -> None:
    rows = [{"x": [1, None]}, {"x": [2, 3]}]
    assert collate(rows)["x"] == [[1, None], [2, 3]]
    rows = [{"x": [1, None, 4]}, {"x": [2]}]
    assert collate(rows)["x"] == [[1, None, 4], [2]]


def test_structs_are_collated_recursively() -> None:
    rows = [{"point": {"x": 1, "tags": ["a"]}}, {"point": {"x": 2, "tags": []}}]
    batch = collate(rows)
    assert batch["point"]["x"].tolist() == [1, 2]
    assert batch["point"]["tags"] == [["a"], []]


def test_numpy_values() -> None:
    rows = [{"a": np.arange(3, dtype=np.int32) + i, "s": np.int64(i), "u": np.uint32(i),
             "r": np.arange(i, dtype=np.float32)} for i in range(3)]
    batch = collate(rows)
    assert batch["a"].dtype == torch.int32
    assert batch["a"].tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 4]]
    assert batch["s"].tolist() == [0, 1, 2] and batch["s"].dtype == torch.int64
    assert batch["u"].tolist() == [0, 1, 2] and batch["u"].dtype == torch.int64
    assert batch["r"].tolist() == [[0, 0], [0, 0], [0, 1]]
    assert batch["r_mask"].tolist() == [[False, False], [True, False], [True, True]]


def test_tensor_values() -> None:
    rows = [{"t": torch.tensor([i, i]), "z": torch.tensor(i), "v": torch.ones(i + 1)}
            for i in range(3)]
    batch = collate(rows)
    assert batch["t"].tolist() == [[0, 0], [1, 1], [2, 2]]
    assert batch["z"].tolist() == [0, 1, 2]
    assert batch["v"].tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert batch["v_mask"].sum().item() == 6


def test_errors_name_the_problem() -> None:
    with pytest.raises(ArgumentError, match="tokens_mask"):
        collate([{"tokens": [1], "tokens_mask": 1}, {"tokens": [1, 2], "tokens_mask": 2}])
    with pytest.raises(ArgumentError, match="row 1"):
        collate([{"a": 1}, {"b": 1}])
    assert collate([]) == {}


def test_row_batch_fast_path_matches_and_notices_changes() -> None:
    whole = torch.arange(12).reshape(3, 4)
    batch = RowBatch(["x", "s"], 3, {"x": whole}, {"s": ["0", "1", "2"]})
    assert not batch.materialized
    out = collate(batch)
    assert out["x"] is whole and out["s"] == ["0", "1", "2"]
    assert not batch.materialized  # no row dict was built
    assert [(r["x"].tolist(), r["s"]) for r in batch] == [(whole[k].tolist(), str(k))
                                                          for k in range(3)]
    assert RowBatch(["s"], 2, {}, {"s": ["a", "b"]}) == [{"s": "a"}, {"s": "b"}]
    assert batch.materialized and collate(batch)["x"] is whole
    assert collate(list(batch))["x"].tolist() == whole.tolist()
    batch[1]["x"] = torch.zeros(4, dtype=torch.int64)  # a transform replaced a value
    assert collate(batch)["x"].tolist() == [[0, 1, 2, 3], [0, 0, 0, 0], [8, 9, 10, 11]]
    batch.append({"x": torch.ones(4, dtype=torch.int64), "s": "3"})
    assert len(batch) == 4 and collate(batch)["x"].shape == (4, 4)
    del batch[0]
    assert collate(batch)["s"] == ["1", "2", "3"]


def test_row_batch_of_numpy_columns() -> None:
    whole = np.arange(6, dtype=np.uint16).reshape(2, 3)
    batch = RowBatch(["a", "r"], 2, {"a": whole}, {"r": [np.arange(1), np.arange(2)]})
    out = collate(batch)
    assert out["a"].dtype == torch.int64 and out["a"].tolist() == whole.tolist()
    assert out["r"].tolist() == [[0, 0], [0, 1]] and out["r_mask"].tolist() == [[True, False],
                                                                                [True, True]]
    with pytest.raises(ArgumentError, match="a_mask"):
        collate(RowBatch(["a", "a_mask"], 2, {}, {"a": [[1], [1, 2]], "a_mask": [0, 0]}))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(-1000, 1000), max_size=6), min_size=1, max_size=8))
def test_padding_and_mask_reconstruct_the_lists(lists: list[list[int]]) -> None:
    batch = collate([{"x": v} for v in lists])
    if len({len(v) for v in lists}) == 1:
        assert batch["x"].tolist() == lists
        return
    values, mask = batch["x"], batch["x_mask"]
    assert [values[k][mask[k]].tolist() for k in range(len(lists))] == lists


def test_python_floats_keep_float64_as_torchs_default_collate_does() -> None:
    values = [1e10 + i / 3 for i in range(4)]
    rows = [{"x": v, "v": [v, v + 1], "r": [v] * (i + 1)} for i, v in enumerate(values)]
    batch = collate(rows)
    assert batch["x"].dtype == torch.float64 == torch.utils.data.default_collate(values).dtype
    assert batch["x"].tolist() == values  # not rounded to float32
    assert batch["v"].dtype == torch.float64 and batch["v"][:, 0].tolist() == values
    assert batch["r"].dtype == torch.float64
    assert batch["r"][batch["r_mask"]].tolist() == [v for i, v in enumerate(values)
                                                    for _ in range(i + 1)]
    ints = collate([{"i": 2**40 + k, "b": k % 2 == 0} for k in range(3)])
    assert ints["i"].dtype == torch.int64 and ints["i"].tolist() == [2**40, 2**40 + 1, 2**40 + 2]
    assert ints["b"].dtype == torch.bool and ints["b"].tolist() == [True, False, True]


@pytest.mark.parametrize(
    "rows",
    [
        [[[], [7]]],
        [[[], [7]], [[], [8, 9]]],
        [[[1], [2, 3]], [[4], [5, 6]]],
        [[[1, 2], [3]], [[4, 5], [6, 7]]],
    ],
)
def test_nested_lists_of_unequal_inner_lengths_keep_every_value(
    rows: list[list[list[int]]],
) -> None:
    # torch.tensor([[[], [7]]]) is an empty (1, 2, 0) tensor: the values must not vanish
    batch = collate([{"n": r} for r in rows])
    assert batch["n"] == rows
    assert list(batch) == ["n"]


def test_nested_lists_of_one_shape_are_stacked() -> None:
    rows = [[[i, i + 1], [i + 2, i + 3]] for i in range(3)]
    batch = collate([{"n": r} for r in rows])
    assert batch["n"].shape == (3, 2, 2) and batch["n"].tolist() == rows


@pytest.mark.parametrize(
    ("values", "padding", "dtype"),
    [
        ([np.array([1, 2], np.uint8), np.array([3], np.uint8)], -1, "uint8"),
        ([np.array([1, 2], np.int8), np.array([3], np.int8)], 300, "int8"),
        ([torch.tensor([1, 2]), torch.tensor([3])], 0.5, "int64"),
        ([torch.tensor([1.0, 2.0], dtype=torch.float16), torch.tensor([3.0],
                                                                     dtype=torch.float16)],
         1e6, "float16"),
        ([[True, False], [True]], 2, "bool"),
        ([[1, 2], [3]], float("nan"), "int64"),
    ],
)
def test_a_padding_value_the_dtype_cannot_hold_is_refused(
    values: list[Any], padding: float, dtype: str,
) -> None:
    with pytest.raises(ArgumentError, match=rf"padding_value .* column 'x'.*{dtype}"):
        collate([{"x": v} for v in values], padding_value=padding)


@pytest.mark.parametrize(
    ("values", "padding", "expected"),
    [
        ([np.array([1, 2], np.uint8), np.array([3], np.uint8)], 255, [[1, 2], [3, 255]]),
        ([np.array([1, 2], np.int8), np.array([3], np.int8)], -128, [[1, 2], [3, -128]]),
        ([[1.5, 2.0], [3.0]], float("-inf"), [[1.5, 2.0], [3.0, float("-inf")]]),
        ([[True, False], [True]], 0, [[True, False], [True, False]]),
        ([[1, 2], [3]], -1.0, [[1, 2], [3, -1]]),
    ],
)
def test_a_padding_value_the_dtype_holds_pads(
    values: list[Any], padding: float, expected: list[list[Any]],
) -> None:
    batch = collate([{"x": v} for v in values], padding_value=padding)
    assert batch["x"].tolist() == expected
    assert batch["x_mask"].tolist() == [[True, True], [True, False]]


@pytest.mark.parametrize(
    "values",
    [
        [2**63, 1],  # numpy would make these float64, rounding 2**63 + 1
        [2**63 + 1, 3],
        [2**64, 1],
        [2**63],
        [[2**63 + 1, 1], [1, 2]],
        [[2**63 + 1], [1, 2]],
        [[1, 2], [3, 2**63]],  # the first beyond int64 last of all
        [[-(2**63) - 1], [1, 2, 3]],
        [[2**64, 0, 0], [7]],
        [-(2**63) - 1, 0],
    ],
)
def test_python_ints_beyond_int64_stay_exact_lists(values: list[Any]) -> None:
    assert collate([{"x": v} for v in values])["x"] == values


def test_large_floats_and_numpy_uint64_keep_their_rules() -> None:
    assert collate([{"x": 1e19}, {"x": 2}])["x"].tolist() == [1e19, 2.0]
    assert collate([{"x": [1e19, float("inf")]}, {"x": [1, 2]}])["x"].dtype == torch.float64
    with pytest.raises(OutOfRangeError, match="2\\*\\*63"):
        collate([{"x": np.uint64(2**63)}, {"x": np.uint64(1)}])


@pytest.mark.parametrize(
    ("options", "word"),
    [({"padding_value": None}, "padding_value"), ({"padding_value": "-1"}, "padding_value"),
     ({"mask_suffix": 1}, "mask_suffix"), ({"mask_suffix": ""}, "mask_suffix"),
     # a bool was taken as 1 (or 0) and padded with, said by no error
     ({"padding_value": True}, "padding_value must be a number.*got bool True"),
     ({"padding_value": False}, "padding_value must be a number.*got bool False"),
     ({"padding_value": np.bool_(True)}, "padding_value must be a number")],
)
def test_bad_options_are_refused_before_any_batch(options: dict[str, Any], word: str) -> None:
    # torch's float() would fail only on a ragged batch; an int suffix made the key "tokens1"
    rows = [{"tokens": [1]}, {"tokens": [1, 2]}]
    with pytest.raises(ArgumentError, match=word):
        collate(rows, **options)
    with pytest.raises(ArgumentError, match=word):
        collate([{"n": 1}], **options)


def test_what_is_not_a_list_of_rows_is_named() -> None:
    # DataLoader(batch_size=None) hands collate_fn one row, a dict
    with pytest.raises(ArgumentError, match="batch_size"):
        collate({"tokens": [1, 2], "label": 3})  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="list of rows"):
        collate(iter([{"label": 3}]))  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="row 1 is int"):
        collate([{"label": 3}, 4])  # type: ignore[list-item]
    assert collate(({"label": 3}, {"label": 4}))["label"].tolist() == [3, 4]
    assert collate([{"flag": [True]}, {"flag": [True, True]}], padding_value=0)[
        "flag"].tolist() == [[True, False], [True, True]]


def _empty_lists_dataset(root: Any, rows: int = 12) -> Any:
    """A shard whose list columns hold empty lists for every row (values a function of i)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir(exist_ok=True)
    table = pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "t32": pa.array([[] for _ in range(rows)], pa.list_(pa.int32())),
        "t8": pa.array([[] for _ in range(rows)], pa.list_(pa.int8())),
        "t64": pa.array([[] for _ in range(rows)], pa.list_(pa.int64())),
        "flags": pa.array([[] for _ in range(rows)], pa.list_(pa.bool_())),
        "w": pa.array([[] for _ in range(rows)], pa.list_(pa.float32())),
        # in the second half of the rows the lists have values: the dtype must not change
        "late": pa.array([[] if i < rows // 2 else [i] for i in range(rows)],
                         pa.list_(pa.int32())),
        "nested": pa.array([[[]] for _ in range(rows)], pa.list_(pa.list_(pa.int16()))),
        "s": pa.array([{"ids": []} for _ in range(rows)],
                      pa.struct([("ids", pa.list_(pa.uint8()))])),
    })
    pq.write_table(table, root / "part-0.parquet")
    return root


def test_all_empty_lists_keep_an_integer_dtype_given_the_schema(tmp_path: Any) -> None:
    from undertale_duck import ParquetDataset

    ds = ParquetDataset(_empty_lists_dataset(tmp_path / "d"))
    empty = collate(ds.__getitems__([0, 1, 2]), schema=ds.schema)
    full = collate(ds.__getitems__([9, 10, 11]), schema=ds.schema)
    # python rows: ints collate to int64 when the lists have values, so empty ones do too
    for key in ("t32", "t8", "t64", "late"):
        assert empty[key].dtype == torch.int64, key
        assert tuple(empty[key].shape) == (3, 0)
    assert full["late"].dtype == empty["late"].dtype
    assert full["late"].tolist() == [[9], [10], [11]]
    assert empty["flags"].dtype == torch.bool
    assert empty["w"].dtype == torch.float64
    assert empty["nested"].dtype == torch.int64 and tuple(empty["nested"].shape) == (3, 1, 0)
    assert empty["s"]["ids"].dtype == torch.int64
    with pytest.raises(ArgumentError, match="schema must be a pyarrow Schema"):
        collate(ds.__getitems__([0]), schema={"t32": "int32"})  # type: ignore[arg-type]


def test_each_call_follows_its_own_schema_when_schemas_alternate() -> None:
    import pyarrow as pa

    # collate keeps the last schema's column types: a schema that is another object, even
    # one equal in names, must be read again, and a non-schema is refused every time
    rows = [{"t": []}, {"t": []}]
    as_int = pa.schema([("t", pa.list_(pa.int32()))])
    as_bool = pa.schema([("t", pa.list_(pa.bool_()))])
    for _ in range(3):
        assert collate(rows, schema=as_int)["t"].dtype == torch.int64
        assert collate(rows, schema=as_bool)["t"].dtype == torch.bool
        assert collate(rows)["t"].dtype == torch.float64  # no schema: as torch.tensor([[]])
        with pytest.raises(ArgumentError, match="schema must be a pyarrow Schema"):
            collate(rows, schema={"t": "int32"})  # type: ignore[arg-type]
    assert collate(rows, schema=as_int)["t"].dtype == torch.int64


@pytest.mark.parametrize("fmt", ["numpy", "torch"])
def test_all_empty_lists_keep_the_arrow_dtype_in_numpy_and_torch_rows(
    tmp_path: Any, fmt: str
) -> None:
    from undertale_duck import ParquetDataset

    ds = ParquetDataset(_empty_lists_dataset(tmp_path / "d"), format=fmt)  # type: ignore[arg-type]
    for rows in (ds.__getitems__([0, 1, 2]), [ds[0], ds[1], ds[2]]):
        batch = collate(rows)
        assert batch["t32"].dtype == torch.int32
        assert batch["t8"].dtype == torch.int8
        assert batch["t64"].dtype == torch.int64
        assert tuple(batch["t8"].shape) == (3, 0)


def test_load_with_collate_keeps_empty_lists_integer(tmp_path: Any) -> None:
    from undertale_duck import load

    loader = load(_empty_lists_dataset(tmp_path / "d"), None, collate, 4)
    batches = list(loader)
    assert [b["id"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert [b["late"].dtype for b in batches] == [torch.int64] * 3
    assert batches[0]["t8"].dtype == torch.int64 and tuple(batches[0]["t8"].shape) == (4, 0)
    assert batches[2]["late"].tolist() == [[8], [9], [10], [11]]
    # a mixture of sources with one schema: told it too
    from undertale_duck import Mixture

    mix = Mixture([str(tmp_path / "d"), str(tmp_path / "d")])
    batches = list(load(mix, None, collate, 4))
    assert [b["t32"].dtype for b in batches] == [torch.int64] * 6
