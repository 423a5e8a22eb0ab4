-- Read the first rows of one shard (LIMIT 0: its footer and schema only), to find which
-- shard a failed query or view tripped on.
SELECT *
FROM read_parquet($path)
LIMIT $rows;
