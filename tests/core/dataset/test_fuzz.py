"""Property-based fuzzing: generated schemas, nulls, nesting, row groups and shard splits."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, create_model

from undertale_duck import ParquetDataset

# ------------------------------------------------------------------ types and their values
Scalar = tuple[pa.DataType, st.SearchStrategy[Any]]


def _int(bits: int, signed: bool) -> Scalar:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    kind = {(8, True): pa.int8(), (16, True): pa.int16(), (32, True): pa.int32(),
            (64, True): pa.int64(), (8, False): pa.uint8(), (16, False): pa.uint16(),
            (32, False): pa.uint32(), (64, False): pa.uint64()}[(bits, signed)]
    return kind, st.integers(lo, hi)


SCALARS: list[Scalar] = [
    *(_int(b, s) for b in (8, 16, 32, 64) for s in (True, False)),
    (pa.float32(), st.floats(width=32, allow_nan=False)),
    (pa.float64(), st.floats(allow_nan=False)),
    (pa.bool_(), st.booleans()),
    (pa.string(), st.text(max_size=12)),
    (pa.large_string(), st.text(max_size=5)),
    (pa.binary(), st.binary(max_size=12)),
    (pa.date32(), st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1))),
    (pa.timestamp("us"), st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1))),
    (pa.timestamp("ms"), st.datetimes(dt.datetime(1970, 1, 1), dt.datetime(2100, 1, 1)).map(
        lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))),
    (pa.timestamp("us", tz="UTC"), st.datetimes(dt.datetime(1970, 1, 1), dt.datetime(2100, 1, 1),
                                                 timezones=st.just(dt.UTC))),
    (pa.time64("us"), st.times()),
    (pa.duration("us"), st.timedeltas(dt.timedelta(days=-999), dt.timedelta(days=999))),
    (pa.large_binary(), st.binary(max_size=6)),
    (pa.binary(3), st.binary(min_size=3, max_size=3)),
    (pa.decimal128(12, 3), st.decimals(min_value=-10**8, max_value=10**8, places=3,
                                       allow_nan=False, allow_infinity=False).map(
        lambda d: d.quantize(decimal.Decimal("0.001")))),
]


@st.composite
def column_type(draw: st.DrawFn, depth: int = 0) -> Scalar:
    """An Arrow type and a strategy for its (nullable) values, nested up to two levels."""
    nested = ["list", "large_list", "struct", "dict", "map"]
    choices = ["scalar"] * 5 + (nested if depth < 2 else [])
    kind = draw(st.sampled_from(choices))
    if kind == "scalar":
        dtype, values = draw(st.sampled_from(SCALARS))
    elif kind == "dict":
        dtype, values = pa.dictionary(pa.int32(), pa.string()), st.sampled_from(["a", "bb", ""])
    elif kind == "map":
        key, keys = draw(st.sampled_from([SCALARS[3], (pa.string(), st.text(max_size=3))]))
        item, items = draw(st.sampled_from(SCALARS))
        dtype = pa.map_(key, item)
        values = st.lists(st.tuples(keys, st.none() | items), max_size=3, unique_by=lambda t: t[0])
    elif kind in ("list", "large_list"):
        inner, inner_values = draw(column_type(depth + 1))
        if pa.types.is_dictionary(inner):
            inner, inner_values = pa.string(), st.text(max_size=3)
        dtype = pa.list_(inner) if kind == "list" else pa.large_list(inner)
        values = st.lists(st.none() | inner_values, max_size=4)
    else:
        n = draw(st.integers(1, 3))
        fields = []
        strategies = {}
        for k in range(n):
            inner, inner_values = draw(column_type(depth + 1))
            if pa.types.is_dictionary(inner):
                inner, inner_values = pa.string(), st.text(max_size=3)
            fields.append(pa.field(f"f{k}", inner))
            strategies[f"f{k}"] = st.none() | inner_values
        dtype = pa.struct(fields)
        values = st.fixed_dictionaries(strategies)
    return dtype, st.none() | values if draw(st.booleans()) else values


@st.composite
def datasets(draw: st.DrawFn) -> tuple[pa.Table, list[int], int, int]:
    """A table, how its rows split into shards, a row group size and a window size."""
    ncols = draw(st.integers(1, 4))
    types = [draw(column_type()) for _ in range(ncols)]
    nrows = draw(st.integers(1, 40))
    columns = []
    fields = []
    for k, (dtype, values) in enumerate(types):
        data = draw(st.lists(values, min_size=nrows, max_size=nrows))
        if pa.types.is_dictionary(dtype):
            array = pa.array(data, pa.string()).dictionary_encode()
        else:
            array = pa.array(data, dtype)
        columns.append(array)
        fields.append(pa.field(f"c{k}", array.type))
    table = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    cuts = sorted(draw(st.lists(st.integers(0, nrows), max_size=3)))
    bounds = [0, *cuts, nrows]
    sizes = [b - a for a, b in itertools.pairwise(bounds)]
    return table, sizes, draw(st.integers(1, 16)), draw(st.sampled_from([1, 300, 4096, 1 << 20]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(datasets())
def test_rows_equal_pyarrow(case: tuple[pa.Table, list[int], int, int]) -> None:
    table, sizes, row_group, window_bytes = case
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        start = 0
        for k, size in enumerate(sizes):
            path = Path(tmp) / f"part-{k:03d}.parquet"
            pq.write_table(table.slice(start, size), path, row_group_size=row_group)
            paths.append(path)
            start += size
        want = pq.read_table(paths).to_pylist() if len(paths) > 1 else table.to_pylist()
        assert want == table.to_pylist()
        ds = ParquetDataset(paths, memory=1, window_bytes=window_bytes)
        assert len(ds) == table.num_rows
        assert [ds[i] for i in range(len(ds))] == want
        back = list(range(len(ds) - 1, -1, -2))
        assert ds.__getitems__(back) == [want[i] for i in back]
        got = ds.sql("SELECT count(*) AS n FROM dataset").to_pylist()
        assert got == [{"n": table.num_rows}]
        ds.close()


# ------------------------------------------------------------------ validation
def annotation(dtype: pa.DataType, name: str = "M") -> Any:
    """The Python type a pydantic schema would give a column of this Arrow type (nullable)."""
    inner: Any
    if pa.types.is_dictionary(dtype):
        return annotation(dtype.value_type, name)
    if pa.types.is_boolean(dtype):
        inner = bool
    elif pa.types.is_integer(dtype):
        inner = int
    elif pa.types.is_floating(dtype):
        inner = float
    elif pa.types.is_decimal(dtype):
        inner = decimal.Decimal
    elif pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        inner = str
    elif any(
        check(dtype)
        for check in (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary)
    ):
        inner = bytes
    elif pa.types.is_timestamp(dtype):
        inner = dt.datetime
    elif pa.types.is_date(dtype):
        inner = dt.date
    elif pa.types.is_time(dtype):
        inner = dt.time
    elif pa.types.is_duration(dtype):
        inner = dt.timedelta
    elif pa.types.is_map(dtype):
        # a MAP value reaches pydantic as a list of (key, value) pairs, which a dict refuses
        # (validation's `type` check says so); Any takes it
        inner = Any
    elif pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        inner = list[annotation(dtype.value_type, name + "I")]  # type: ignore[misc]
    elif pa.types.is_struct(dtype):
        fields: dict[str, Any] = {
            f.name: (annotation(f.type, f"{name}_{f.name}"), ...) for f in dtype
        }
        inner = create_model(name, **fields)
    else:  # pragma: no cover - the generator makes no other types
        raise AssertionError(dtype)
    return inner | None


def model_for(schema: pa.Schema) -> type[BaseModel]:
    """A pydantic model class whose fields are the table's columns."""
    fields: dict[str, Any] = {f.name: (annotation(f.type, f"S_{f.name}"), ...) for f in schema}
    return create_model("Generated", **fields)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(datasets())
def test_generated_data_validates_against_its_own_schema(
    case: tuple[pa.Table, list[int], int, int],
) -> None:
    table, sizes, row_group, _ = case
    # checks.py reports Parquet durations (DuckDB INTERVAL) as not matching timedelta
    assume("duration" not in str(table.schema))
    model = model_for(table.schema)
    for row in table.to_pylist():  # the model really describes the data
        model.model_validate(row)
    with tempfile.TemporaryDirectory() as tmp:
        start = 0
        paths = []
        for k, size in enumerate(sizes):
            path = Path(tmp) / f"part-{k:03d}.parquet"
            pq.write_table(table.slice(start, size), path, row_group_size=row_group)
            paths.append(path)
            start += size
        ds = ParquetDataset(paths, memory=1)
        report = ds.report(model)
        assert report.passed, report.summary()
        ds.validate(model)
        ds.close()
