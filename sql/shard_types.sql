-- The dataset's columns as DuckDB reads them in one shard (their types: no row is read).
SELECT {columns}
FROM read_parquet($path)
LIMIT 0;
