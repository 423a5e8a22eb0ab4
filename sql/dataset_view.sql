-- The `dataset` view over every shard. DuckDB cannot bind parameters inside a view, so the
-- shard paths arrive as quoted literals ({files}) and the columns as quoted identifiers.
CREATE OR REPLACE VIEW dataset AS
SELECT {columns}
FROM read_parquet({files});
