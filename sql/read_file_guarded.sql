-- One whole-shard window, as read_file.sql, with read_window_guarded.sql's bound on each
-- string and binary value.
SELECT {columns}
FROM read_parquet($path)
WHERE {guard}true;
