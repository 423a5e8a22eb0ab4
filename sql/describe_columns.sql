-- The columns of one shard with their DuckDB types, read from its footer alone.
SELECT column_name, column_type
FROM (DESCRIBE SELECT * FROM read_parquet($path));
