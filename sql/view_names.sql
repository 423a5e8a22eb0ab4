-- The result columns of a view's query as its SELECT list names them (unlike
-- `SELECT * FROM (...)`, which renames a repeated name to `name_1`), read from one shard's
-- schema: only bound, never run. The query is SQL text produced by DuckDB's
-- json_deserialize_sql.
WITH dataset AS (
    SELECT {columns}, file_row_number AS __ud_row
    FROM read_parquet($path, file_row_number = true)
    WHERE file_row_number >= $start AND file_row_number < $stop
)
{view};
