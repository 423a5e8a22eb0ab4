"""A schema whose model holds itself is refused by name (it raised RecursionError)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel
from support.cli_run import invoke

from undertale_duck import ArgumentError, ParquetDataset


class Node(BaseModel):
    v: int
    child: Node | None = None


class Tree(BaseModel):
    v: int
    kids: list[Tree] = []


class A(BaseModel):
    v: int
    b: dict[str, B] | None = None


class B(BaseModel):
    w: int = 0
    back: list[A | None] = []


class Leaf(BaseModel):
    w: int


class Twice(BaseModel):  # the same model in two fields is no cycle
    v: int
    one: Leaf | None = None
    two: list[Leaf] = []


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("recursive") / "data"
    root.mkdir()
    pq.write_table(pa.table({"v": list(range(10))}), root / "part-0.parquet")
    return root


@pytest.mark.parametrize(("model", "field"), [(Node, "child"), (Tree, "kids"), (A, "b.back")])
def test_a_model_holding_itself_is_refused_naming_the_field(
    data: Path, model: type[BaseModel], field: str
) -> None:
    ds = ParquetDataset(data)
    for run in (ds.report, ds.validate):
        with pytest.raises(ArgumentError, match=rf"schema {model.__name__}: field '{field}' "
                                                r"holds \w+ within itself"):
            run(model)


def test_the_command_line_refuses_it_in_one_line(data: Path, tmp_path: Path) -> None:
    schema = tmp_path / "schema.py"
    schema.write_text(
        "from __future__ import annotations\n"
        "from pydantic import BaseModel\n"
        "class Node(BaseModel):\n"
        "    v: int\n"
        "    child: Node | None = None\n"
    )
    status, out, err = invoke("validate", str(data), "--schema", f"{schema}:Node")
    assert status == 2 and out == ""
    assert err.splitlines() == [err.strip()] and "holds Node within itself" in err


def test_a_model_used_in_two_fields_is_checked(data: Path) -> None:
    assert ParquetDataset(data).report(Twice).passed
