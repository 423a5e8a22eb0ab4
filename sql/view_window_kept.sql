-- One window of a view with joins whose kept rows the index knows: the user's query without
-- its WHERE clause (rewritten by DuckDB to carry the source row number as __ud_order) over
-- the source rows of [$start, $stop) (the window's first to last kept row) whose bit is set
-- in $keep (a BITSTRING, one bit per source row from $start), in source row order. Only the
-- columns the projection and joins need are read. The query is SQL text produced by
-- DuckDB's own json_deserialize_sql from the parsed query.
-- The guard is empty, or core/decoded.py's bound on string and binary values (a dictionary
-- bomb stops before DuckDB materialises it).
WITH dataset AS (
    SELECT {columns}, file_row_number AS __ud_row
    FROM read_parquet($path, file_row_number = true)
    WHERE {guard}file_row_number >= $start AND file_row_number < $stop
        AND get_bit($keep::BITSTRING, CAST(file_row_number - $start AS INTEGER)) = 1
)
SELECT * FROM ({view}) ORDER BY __ud_order;
