-- The indexing pass of a view over local rows [$start, $stop) of one shard: the source row
-- numbers the query keeps (also used to locate the rows of one window). The
-- rewritten query projects nothing else, so DuckDB reads only the columns its filter and
-- joins need. The query is SQL text produced by DuckDB's json_deserialize_sql.
WITH dataset AS (
    SELECT {columns}, file_row_number AS __ud_row
    FROM read_parquet($path, file_row_number = true)
    WHERE file_row_number >= $start AND file_row_number < $stop
)
SELECT __ud_order FROM ({view}) ORDER BY __ud_order;
