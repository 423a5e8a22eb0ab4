-- The bytes the string and binary values of one window decode to (the aggregates sum their
-- lengths, which DuckDB computes without materialising the values).
SELECT {aggregates}
FROM read_parquet($path, file_row_number = true)
WHERE file_row_number >= $start AND file_row_number < $stop;
