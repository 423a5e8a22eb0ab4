"""Train/validation splits by a seeded md5 hash of a key: disjoint, complete, stable, exact."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli_run import invoke

from undertale_duck import (
    ArgumentError,
    DataModule,
    Pack,
    ParquetDataset,
    QueryError,
    Split,
)

SCHEMA = pa.schema(
    [("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
     ("tokens", pa.list_(pa.int32()))]
)


def row(g: int) -> dict[str, Any]:
    """Every value a function of the global row index ``g``."""
    return {"id": g, "name": None if g % 13 == 0 else f"doc-{g}", "score": g / 3,
            "tokens": [(g + k) % 100 for k in range(g % 6)]}


def write(root: Path, start: int, sizes: list[int], prefix: str = "part") -> None:
    root.mkdir(parents=True, exist_ok=True)
    g = start
    for k, size in enumerate(sizes):
        table = pa.Table.from_pylist([row(i) for i in range(g, g + size)], schema=SCHEMA)
        pq.write_table(table, root / f"{prefix}-{k:05d}.parquet", row_group_size=50)
        g += size


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("split")
    write(root, 0, [700, 0, 500, 800])
    return root


def ids(ds: ParquetDataset) -> list[int]:
    return [r["id"] for r in ds.sql("SELECT id FROM dataset_view ORDER BY id").to_pylist()]


@settings(max_examples=15)
@given(fraction=st.floats(0.001, 0.999), seed=st.integers(0, 2**31), key=st.sampled_from(
    ["id", "name"]))
def test_parts_are_disjoint_complete_and_follow_the_rule(
    data: Path, fraction: float, seed: int, key: str
) -> None:
    parts = {}
    for part in ("train", "validation"):
        split = Split(key=key, fraction=fraction, part=part, seed=seed)
        ds = ParquetDataset(data, split=split, columns=["id", "name"])
        rows = [ds[i] for i in range(len(ds))]
        assert all(split.part_of(r[key]) == part for r in rows)
        parts[part] = [r["id"] for r in rows]
    train, validation = set(parts["train"]), set(parts["validation"])
    assert not train & validation
    assert train | validation == set(range(2000))
    assert len(parts["train"]) + len(parts["validation"]) == 2000


def test_null_keys_are_in_the_train_part(data: Path) -> None:
    split = Split(key="name", fraction=0.5, part="validation")
    validation = ids(ParquetDataset(data, split=split))
    train = ids(ParquetDataset(data, split=split.other()))
    assert not [g for g in validation if g % 13 == 0]
    assert {g for g in range(2000) if g % 13 == 0} <= set(train)


def test_sizes_follow_the_fraction(data: Path) -> None:
    for fraction in (0.02, 0.1, 0.5):
        ds = ParquetDataset(data, split=Split(key="id", fraction=fraction, part="validation"))
        assert abs(len(ds) / 2000 - fraction) < 0.03


def test_adding_shards_moves_no_row(tmp_path: Path) -> None:
    write(tmp_path, 0, [400, 300])
    split = Split(key="id", fraction=0.2, part="validation", seed=7)
    before = set(ids(ParquetDataset(tmp_path, split=split)))
    write(tmp_path, 700, [500], prefix="zz-later")
    after = set(ids(ParquetDataset(tmp_path, split=split)))
    assert {g for g in after if g < 700} == before
    assert after - before


def test_split_and_where_and_pack(data: Path) -> None:
    split = Split(key="id", fraction=0.3, part="train", seed=1)
    ds = ParquetDataset(data, split=split, where="id % 2 = 0")
    assert set(ids(ds)) == {g for g in range(0, 2000, 2) if split.part_of(g) == "train"}
    packed = ParquetDataset(data, split=split, pack=Pack(column="tokens", length=4, eod=-1))
    kept = [g for g in range(2000) if split.part_of(g) == "train"]
    stream = [t for g in kept for t in [*row(g)["tokens"], -1]]
    assert len(packed) == len(stream) // 4
    assert packed[len(packed) - 1]["tokens"] == stream[(len(packed) - 1) * 4 : len(packed) * 4]
    assert packed.split == split


def test_fingerprints_differ_per_part_and_seed(data: Path) -> None:
    a = ParquetDataset(data, split=Split(key="id", fraction=0.3, part="train"))
    b = ParquetDataset(data, split=Split(key="id", fraction=0.3, part="validation"))
    c = ParquetDataset(data, split=Split(key="id", fraction=0.3, part="train", seed=2))
    assert len({a.fingerprint, b.fingerprint, c.fingerprint}) == 3


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"key": "id", "fraction": 0}, "split.fraction"),
        ({"key": "id", "fraction": 1}, "split.fraction"),
        ({"key": "id", "fraction": -0.5}, "split.fraction"),
        ({"key": "id", "fraction": "half"}, "split.fraction"),
        ({"key": "id", "fraction": 0.5, "part": "test"}, "split.part"),
        ({"key": "id", "fraction": 0.5, "seed": -1}, "split.seed"),
        ({"key": "", "fraction": 0.5}, "split.key"),
    ],
)
def test_hostile_splits_name_the_argument(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ArgumentError, match=named):
        Split(**fields)


def test_unusable_keys_and_combinations(data: Path) -> None:
    with pytest.raises(ArgumentError, match=r"split.key.*'score' is double"):
        ParquetDataset(data, split=Split(key="score", fraction=0.5))
    with pytest.raises((ArgumentError, QueryError), match="nope"):
        ParquetDataset(data, split=Split(key="nope", fraction=0.5))
    with pytest.raises(ArgumentError, match="query="):
        ParquetDataset(data, split=Split(key="id", fraction=0.5), query="SELECT * FROM dataset")
    with pytest.raises(ArgumentError, match="split must be a Split"):
        ParquetDataset(data, split=0.5)  # type: ignore[arg-type]


def test_a_where_cannot_take_the_split_apart(data: Path) -> None:
    # "(true) OR (true) AND (<split>)" would put every row in both parts
    for part in ("train", "validation"):
        with pytest.raises(QueryError, match="syntax error"):
            ParquetDataset(data, split=Split(key="id", fraction=0.3, part=part),
                           where="true) OR (true")
    with pytest.raises(ArgumentError, match="where must be an SQL condition"):
        ParquetDataset(data, split=Split(key="id", fraction=0.3), where=" ")
    # a filter ending in a comment works as it does without a split
    parts = {}
    for part in ("train", "validation"):
        split = Split(key="id", fraction=0.3, part=part)
        parts[part] = set(ids(ParquetDataset(data, split=split, where="id < 500 -- why")))
        assert all(split.part_of(g) == part for g in parts[part])
    assert not parts["train"] & parts["validation"]
    assert parts["train"] | parts["validation"] == set(range(500))


def test_datamodule_serves_both_parts_of_one_source(data: Path) -> None:
    split = Split(key="id", fraction=0.25, seed=3)
    module = DataModule(data, data, None, None, 64, split=split, columns=["id"])
    train = [r["id"] for batch in module.train_dataloader() for r in batch]
    validation = [r["id"] for batch in module.val_dataloader() for r in batch]
    assert not set(train) & set(validation)
    assert len(set(train) | set(validation)) >= 2000 - 2 * 64
    assert all(split.part_of(g) == "validation" for g in validation)


def test_datamodule_and_load_refuse_misplaced_splits(data: Path) -> None:
    from undertale_duck import load

    module = DataModule(data, data, None, None, 8, split=0.5)
    with pytest.raises(ArgumentError, match="split must be a Split"):
        module.train_dataloader()
    with pytest.raises(ArgumentError, match="split= applies when load"):
        load(ParquetDataset(data), None, None, 8, split=Split(key="id", fraction=0.5))


def test_the_hash_rule_holds_for_any_text_and_large_integers(tmp_path: Path) -> None:
    keys = ["é", "日本語", "", "a'b\"c", "x" * 300, "\t", "🦆"]
    numbers = [0, -1, 2**63 - 1, -(2**63), 12345678901234]
    (tmp_path / "s").mkdir()
    (tmp_path / "n").mkdir()
    pq.write_table(pa.table({"k": keys}), tmp_path / "s" / "s.parquet")
    pq.write_table(pa.table({"n": pa.array(numbers, pa.int64())}), tmp_path / "n" / "n.parquet")
    for fraction, seed in ((0.5, 0), (0.3, 99)):
        split = Split(key="k", fraction=fraction, part="validation", seed=seed)
        got = {r["k"] for r in ParquetDataset(tmp_path / "s", split=split).sql(
            "SELECT k FROM dataset_view").to_pylist()}
        assert got == {k for k in keys if split.part_of(k) == "validation"}
        split_n = Split(key="n", fraction=fraction, part="validation", seed=seed)
        ds = ParquetDataset(tmp_path / "n", split=split_n)
        assert {ds[i]["n"] for i in range(len(ds))} == {
            n for n in numbers if split_n.part_of(n) == "validation"}


def test_numpy_seeds_and_fractions_split_as_the_equal_python_values(data: Path) -> None:
    # a seed from a numpy config was refused ("must be an integer")
    given = Split(key="id", fraction=np.float64(0.25), seed=np.int64(3), part="validation")
    plain = Split(key="id", fraction=0.25, seed=3, part="validation")
    assert given == plain and type(given.seed) is int and type(given.fraction) is float
    ours, theirs = ParquetDataset(data, split=given), ParquetDataset(data, split=plain)
    assert [r["id"] for r in ours] == [r["id"] for r in theirs] and len(ours) > 0
    assert ours.fingerprint == theirs.fingerprint
    for bad in ({"seed": np.int64(-1)}, {"fraction": np.bool_(True)}, {"seed": np.float64(3)}):
        with pytest.raises(ArgumentError, match="split"):
            Split(key="id", **{"fraction": 0.25, **bad})  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["new\nline", "a\n-- b", "k\x1b[31mred\u202e"])
def test_a_key_named_with_line_breaks_or_controls_splits_and_prints_safely(
    tmp_path: Path, key: str
) -> None:
    # the key's line break became a space when the condition's comment lines were dropped
    # ("Referenced column "new line" not found"), a line starting "--" inside its quotes was
    # dropped as a comment, and `split` printed its control characters raw to the terminal
    root = tmp_path / "data"
    root.mkdir()
    pq.write_table(pa.table({"id": pa.array(range(40), pa.int64()),
                             key: pa.array([f"k{g}" for g in range(40)])}), root / "p.parquet")
    parts = {part: ParquetDataset(root, split=Split(key, 0.3, part, 5))
             for part in ("train", "validation")}
    for part, ds in parts.items():
        want = [g for g in range(40) if Split(key, 0.3, part, 5).part_of(f"k{g}") == part]
        assert ids(ds) == want
    assert len(parts["train"]) + len(parts["validation"]) == 40
    status, out, err = invoke("split", str(root), "--key", key, "--fraction", "0.3",
                              "--seed", "5")
    assert (status, err) == (0, "")
    assert out.isascii() and all(c.isprintable() for line in out.splitlines() for c in line)
    printed = [ln.split("--where ", 1)[1] for ln in out.splitlines() if "--where " in ln]
    for part, word in zip(("train", "validation"), printed, strict=True):
        # what the line says is the condition, once a shell (bash) has read it
        pasted = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True,
                                text=True, check=True).stdout
        assert pasted == Split(key, 0.3, part, 5).where(None)
