-- One window: the contiguous local rows [$start, $stop) of one shard, in file order
-- (the connection keeps preserve_insertion_order on, so no sort is needed).
-- Row groups outside the range are skipped by the file_row_number filter. The guard is
-- empty, or core/decoded.py's bound on each string and binary value: it raises an error
-- (before DuckDB materialises the values) when one is longer than $cap, so that a
-- dictionary bomb stops here.
SELECT {columns}
FROM read_parquet($path, file_row_number = true)
WHERE {guard}file_row_number >= $start AND file_row_number < $stop;
