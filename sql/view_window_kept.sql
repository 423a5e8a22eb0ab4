-- One window of a view whose kept rows the index knows: the user's query without its WHERE
-- clause (rewritten by DuckDB to carry the source row number as __ud_order) over the source
-- rows of [$start, $stop) listed in the registered table __ud_keep (column __ud_row). The
-- semi join does not keep source order: the reader sorts by __ud_order when needed, which
-- costs less than a sort here (DuckDB would move every column; most windows arrive in
-- order). Only the columns the projection and joins need are read, and DuckDB
-- skips decoding the rows that are not listed. The query is SQL text produced by DuckDB's
-- own json_deserialize_sql from the parsed query.
WITH dataset AS (
    SELECT {columns}, file_row_number AS __ud_row
    FROM read_parquet($path, file_row_number = true)
    WHERE file_row_number >= $start AND file_row_number < $stop
        AND file_row_number IN (SELECT __ud_row FROM __ud_keep)
)
SELECT * FROM ({view});
