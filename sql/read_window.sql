-- One window: the contiguous local rows [$start, $stop) of one shard, in file order
-- (the connection keeps preserve_insertion_order on, so no sort is needed).
-- Row groups outside the range are skipped by the file_row_number filter.
SELECT {columns}
FROM read_parquet($path, file_row_number = true)
WHERE file_row_number >= $start AND file_row_number < $stop;
