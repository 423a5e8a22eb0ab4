-- The DuckDB types of one shard's columns: binding reads only the footer, no rows are scanned.
SELECT *
FROM read_parquet($files)
LIMIT 0
