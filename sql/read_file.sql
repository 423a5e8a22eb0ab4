-- One window that covers its whole shard: every row in file order (the connection keeps
-- preserve_insertion_order on). Without read_window.sql's file_row_number column and filter
-- the read is about 10% faster (measured on 25,000-row shards of 512-token rows). The guard
-- is empty, or read_window.sql's bound on each string and binary value.
SELECT {columns}
FROM read_parquet($path)
WHERE {guard}true;
