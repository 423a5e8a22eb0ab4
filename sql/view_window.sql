-- One window of a view: the user's query (rewritten by DuckDB to carry the source row number
-- as __ud_order) over the local rows [$start, $stop) of one shard, in source row order.
-- The query is SQL text produced by DuckDB's own json_deserialize_sql from the parsed query.
-- The guard is empty, or core/decoded.py's bound on string and binary values (a dictionary
-- bomb stops before DuckDB materialises it).
WITH dataset AS (
    SELECT {columns}, file_row_number AS __ud_row
    FROM read_parquet($path, file_row_number = true)
    WHERE {guard}file_row_number >= $start AND file_row_number < $stop
)
SELECT * FROM ({view}) ORDER BY __ud_order;
