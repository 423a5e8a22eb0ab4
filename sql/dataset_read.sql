-- One read of the `dataset` view: shards whose columns DuckDB reads as the first shard's
-- types, or one shard whose drifting columns are converted to them (drift_cast.sql).
SELECT {columns}
FROM read_parquet({files})
