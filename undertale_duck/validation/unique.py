"""Uniqueness checks: fields marked ``Unique`` have no value twice across the whole dataset."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from ..common.text import first_line
from ..core.runtime import sqlfiles
from . import schemas
from .layout import compatible_type
from .plan import value_sql
from .state import RunState, ShardGroup


def unique_checks(state: RunState, groups: Sequence[ShardGroup]) -> None:
    """Check every ``Unique`` field over all shards where its type is compatible.

    One query counts duplicated rows; only when there are some, two more find the count per
    shard and the first offending rows (grouped by value). A query that fails because of one
    undecodable shard is rerun without it (the shard becomes a failed ``readable`` check).

    Args:
        state: The run.
        groups: The readable shards grouped by DuckDB schema.
    """
    for target in state.targets:
        if not any(schemas.is_unique_marker(m) for m in target.metadata):
            continue
        tally = state.tally("unique", target.label, f"{target.label} is unique")
        members = [g for g in groups if compatible_type(state, target, g) is not None]
        if not members:
            continue
        indices = sorted(i for g in members for i in g.indices if i not in state.errors)
        value = value_sql(target.path)
        rows_sql = state.relation.rows
        sql = sqlfiles.render("checks/unique", value=value, rows=rows_sql)
        tally.sql.append(sql)
        tally.condition = f"{value} occurs in more than one row"
        state.step(f"unique {target.label}")
        try:
            (_, duplicated), *_ = state.query(sql, {"files": state.files(indices)})
        except duckdb.Error as exc:
            failure = first_line(exc)
            kept = [i for i in indices if state.decodes(i)]
            try:
                if len(kept) == len(indices) or not kept:
                    raise  # not a shard's fault (or nothing left to check)
                indices = kept
                (_, duplicated), *_ = state.query(sql, {"files": state.files(indices)})
            except duckdb.Error:
                tally.error = f"the uniqueness query failed: {failure}"
                continue
        files = state.files(indices)
        if not duplicated:
            continue
        state.step(f"unique {target.label} per shard")
        per_shard_sql = sqlfiles.render("checks/unique_shards", value=value, rows=rows_sql)
        examples_sql = sqlfiles.render("checks/unique_examples", value=value, rows=rows_sql)
        try:
            for shard, count in state.query(per_shard_sql, {"files": files}):
                tally.add(shard, int(count))
            rows = state.query(
                examples_sql,
                {
                    "files": files,
                    "offsets": [state.offsets[i] for i in indices],
                    "limit": state.limit,
                },
            )
        except duckdb.Error as exc:
            tally.violations = max(tally.violations, int(duplicated))
            tally.error = f"the uniqueness query failed: {first_line(exc)}"
            continue
        tally.sql.extend([per_shard_sql, examples_sql])
        for index, shard, row, val in rows:
            tally.examples.append(state.example(index, shard, row, val))
