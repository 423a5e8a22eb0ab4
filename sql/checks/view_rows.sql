-- The rows the checks scan for a view: the view's query over a group of shards, keeping the
-- view's columns, the source shard's path and the source row's number in that shard. The
-- query is SQL text produced by DuckDB's own json_deserialize_sql from the parsed query.
(
    WITH dataset AS (
        SELECT {columns}, file_row_number AS __ud_row, __ud_file
        FROM read_parquet($files, filename = '__ud_file', file_row_number = true)
    )
    SELECT {names}, __ud_shard AS "__undertale_shard", __ud_order AS file_row_number
    FROM ({view})
)
