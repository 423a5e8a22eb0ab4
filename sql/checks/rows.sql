-- The rows the checks scan: every row of a group of shards that share a schema, with the
-- shard's path and each row's number in its shard.
read_parquet($files, filename = '__undertale_shard', file_row_number = true)
