"""Schema classes, the Unique marker, schema loading and the Python -> DuckDB type mapping."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Annotated, Literal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, Field

from undertale_duck import ArgumentError, ParquetDataset, schema
from undertale_duck.validation.plan import row_checks
from undertale_duck.validation.targets import mismatch, targets

ORIGINAL_FIELDS = {
    "Dataset": {"id"},
    "TokenizedDataset": {"id", "tokens", "mask"},
    "TokenizedClassificationDataset": {"id", "tokens", "mask", "label"},
    "SourceDataset": {"id", "source"},
    "SummarizedMixin": {"summary"},
    "SummarizedSourceDataset": {"id", "source", "summary"},
    "BinaryDataset": {"id", "binary"},
    "BinaryDatasetWithSource": {"id", "binary", "source"},
    "FunctionDataset": {"id", "name"},
    "FunctionDatasetWithSource": {"id", "name", "source"},
    "DisassembledFunctionDataset": {"id", "name", "disassembly"},
    "DisassembledFunctionDatasetWithSource": {"id", "name", "disassembly", "source"},
    "SummarizedDisassembledFunctionDatasetWithSource": {
        "id",
        "name",
        "disassembly",
        "source",
        "summary",
    },
    "VulnerabilityMixin": {"vulnerability"},
    "VulnerabilityDisassembledFunctionDatasetWithSource": {
        "id",
        "name",
        "disassembly",
        "source",
        "vulnerability",
    },
}


@pytest.mark.parametrize("name", sorted(ORIGINAL_FIELDS))
def test_builtin_schemas_have_the_original_fields(name: str) -> None:
    cls = getattr(schema, name)
    assert schema.BUILTIN[name] is cls
    assert set(cls.model_fields) == ORIGINAL_FIELDS[name]
    assert schema.load_schema(name) is cls


def test_id_is_unique_and_required() -> None:
    (target,) = [t for t in targets(schema.Dataset) if t.label == "id"]
    assert any(schema.is_unique_marker(m) for m in target.metadata)
    assert not target.nullable and target.required
    assert schema.TokenizedDataset(id="a", tokens=[1], mask=[1]).tokens == [1]


def test_targets_nullable_defaults_and_nested() -> None:
    class Point(BaseModel):
        x: int
        y: float | None = None

    class S(BaseModel):
        a: int | None
        b: Annotated[str, Field(min_length=2)] = "xx"
        p: Point | None

    got = {t.label: (t.nullable, t.required) for t in targets(S)}
    assert got == {
        "a": (True, True),
        "b": (False, False),
        "p": (True, True),
        "p.x": (False, True),
        "p.y": (True, False),
    }


def test_row_checks_from_field_constraints() -> None:
    class S(BaseModel):
        n: int = Field(ge=0, lt=10, multiple_of=2)
        s: str | None = Field(default=None, pattern=r"^a", min_length=1, max_length=4)
        k: Literal["x", "y"]
        t: list[int] = Field(max_length=3)
        u: list[int | None] | None

    by_label: dict[str, list[str]] = {}
    for t in targets(S):
        by_label[t.label] = [c.description for c in row_checks(t)]
    # lax pydantic takes an integral float for an int: a per-row part of the `type` check
    assert by_label["n"] == ["n is not null", "n >= 0", "n < 10", "n is a multiple of 2",
                             "any integer type"]
    # ... and UTF-8 bytes for a str
    assert by_label["s"] == ["length(s) >= 1", "length(s) <= 4", "s matches '^a'", "VARCHAR"]
    assert by_label["k"] == ["k is not null", "k in {'x', 'y'}"]
    assert by_label["t"] == ["t is not null", "t has no null elements", "length(t) <= 3",
                             "list of any integer type"]
    assert by_label["u"] == ["list of any integer type"]


@pytest.mark.parametrize(
    ("annotation", "ok", "bad"),
    [
        (
            int,
            ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "UBIGINT"],
            ["DOUBLE", "VARCHAR", "BOOLEAN", "DECIMAL(10,2)"],
        ),
        (float, ["FLOAT", "DOUBLE", "DECIMAL(10,2)", "INTEGER"], ["VARCHAR", "BOOLEAN"]),
        (str, ["VARCHAR"], ["BLOB", "INTEGER", "VARCHAR[]"]),
        (bytes, ["BLOB"], ["VARCHAR"]),
        (bool, ["BOOLEAN"], ["INTEGER"]),
        (
            dt.datetime,
            [
                "TIMESTAMP", "TIMESTAMP_NS", "TIMESTAMP_MS", "TIMESTAMP_S", "TIMESTAMPTZ",
                "TIMESTAMPTZ_NS",
            ],
            ["DATE", "VARCHAR"],
        ),
        (dt.date, ["DATE"], ["TIMESTAMP"]),
        (dt.time, ["TIME", "TIME_NS", "TIMETZ"], ["TIMESTAMP", "VARCHAR"]),
        (decimal.Decimal, ["DECIMAL(18,3)"], ["DOUBLE"]),
        (list[int], ["INTEGER[]", "TINYINT[]", "BIGINT[4]"], ["DOUBLE[]", "INTEGER", "VARCHAR"]),
        (list[list[int]], ["BIGINT[][]"], ["BIGINT[]"]),
        (list[str] | None, ["VARCHAR[]"], ["INTEGER[]"]),
        # a MAP value reaches pydantic as a list of pairs, which a dict refuses
        (dict[str, int], [], ["MAP(VARCHAR, INTEGER)", "MAP(INTEGER, INTEGER)", "VARCHAR"]),
        (Literal["a", "b"], ["VARCHAR"], ["INTEGER"]),
        (Literal[1, 2], ["INTEGER", "UTINYINT"], ["VARCHAR"]),
    ],
)
def test_type_mapping(annotation: object, ok: list[str], bad: list[str]) -> None:
    for name in ok:
        assert mismatch(annotation, duckdb.sqltype(name)) is None, name
    for name in bad:
        reason = mismatch(annotation, duckdb.sqltype(name))
        assert reason is not None, name
        assert "found " in reason and "expected" in reason, reason


def test_type_mapping_for_nested_models() -> None:
    class Point(BaseModel):
        x: int
        tags: list[str]
        note: str | None = None

    assert mismatch(Point, duckdb.sqltype("STRUCT(x BIGINT, tags VARCHAR[])")) is None
    assert mismatch(Point, duckdb.sqltype("STRUCT(x BIGINT, tags VARCHAR[], z INT)")) is None
    missing = mismatch(Point, duckdb.sqltype("STRUCT(x BIGINT)"))
    assert missing is not None and "'tags'" in missing
    wrong = mismatch(Point, duckdb.sqltype("STRUCT(x VARCHAR, tags VARCHAR[])"))
    assert wrong is not None and "'x'" in wrong
    assert mismatch(list[Point], duckdb.sqltype("STRUCT(x INT, tags VARCHAR[])[]")) is None
    assert mismatch(Point, duckdb.sqltype("VARCHAR")) is not None


def test_load_forms(tmp_path: Path) -> None:
    file = tmp_path / "my_schemas.py"
    file.write_text(
        "from pydantic import BaseModel\n"
        "from undertale_duck.schema import Dataset\n"
        "class Funcs(Dataset):\n"
        "    name: str\n"
        "NOT_A_MODEL = 3\n"
    )
    loaded = schema.load_schema(f"{file}:Funcs")
    assert set(loaded.model_fields) == {"id", "name"}
    assert schema.load_schema("undertale_duck.schema:BinaryDataset") is schema.BinaryDataset
    assert schema.load_schema("undertale_duck.schema:TokenizedDataset") is schema.TokenizedDataset


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("NoSuchSchema", "unknown schema"),
        ("no_such_module_xyz:Thing", "cannot import module"),
        ("undertale_duck.schema:Nope", "has no attribute"),
        ("undertale_duck.schema:Unique", "not a pydantic BaseModel"),
        ("missing/file.py:Thing", "does not exist"),
        (":Thing", "must look like"),
    ],
)
def test_load_errors(spec: str, message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        schema.load_schema(spec)


def test_load_file_that_fails_to_import(tmp_path: Path) -> None:
    file = tmp_path / "broken.py"
    file.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ArgumentError, match="boom"):
        schema.load_schema(f"{file}:X")


def test_check_schema_refuses_instances() -> None:
    with pytest.raises(ArgumentError, match="BaseModel subclass"):
        schema.check_schema(schema.Dataset(id="x"))
    with pytest.raises(ArgumentError):
        schema.check_schema(dict)


def test_load_module_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cwd_schemas_for_test.py").write_text(
        "from undertale_duck.schema import FunctionDataset\n"
        "class Mine(FunctionDataset):\n"
        "    size: int\n"
    )
    monkeypatch.chdir(tmp_path)
    before = list(__import__("sys").path)
    loaded = schema.load_schema("cwd_schemas_for_test:Mine")
    assert set(loaded.model_fields) == {"id", "name", "size"}
    assert __import__("sys").path == before  # the working directory was not left on sys.path


def test_a_model_that_is_not_fully_defined_is_refused(tmp_path: Path) -> None:
    # pydantic raises PydanticUserError for every row of it; validation passed the dataset
    class Later(BaseModel):
        id: str
        other: Undefined  # type: ignore[name-defined]  # noqa: F821

    root = tmp_path / "data"
    root.mkdir()
    pq.write_table(pa.table({"id": [f"r{i}" for i in range(4)], "other": list(range(4))}),
                   root / "a.parquet")
    with pytest.raises(Exception, match="not fully defined") as refused:
        Later.model_validate({"id": "r0", "other": 0})
    assert not isinstance(refused.value, ArgumentError)  # pydantic's own PydanticUserError
    ds = ParquetDataset(root)
    try:
        with pytest.raises(ArgumentError) as info:
            ds.report(Later)
    finally:
        ds.close()
    assert "schema Later is not fully defined (name 'Undefined' is not defined)" in str(info.value)
