-- One window, as read_window.sql, with a bound on each string and binary value: the guard
-- raises an error (before DuckDB materialises the values) when one is longer than $cap, so
-- that a dictionary bomb stops here (core/decoded.py).
SELECT {columns}
FROM read_parquet($path, file_row_number = true)
WHERE {guard}file_row_number >= $start AND file_row_number < $stop;
