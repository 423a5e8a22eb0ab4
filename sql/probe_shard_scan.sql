-- Decode every value of one shard, returning one small row: whether its pages read as
-- Parquet, to tell a shard whose later pages are corrupt from a good shard another reader
-- (read_csv, ...) failed on. hash() reads each value without copying it.
SELECT bit_xor(hash(COLUMNS(*)))
FROM read_parquet($path);
