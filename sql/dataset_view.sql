-- The `dataset` view over every shard. DuckDB cannot bind parameters inside a view, so the
-- shard paths arrive as a list of quoted literals (glob characters escaped) and the columns
-- as quoted identifiers. No placeholder may appear in a comment: a path holding a newline
-- would end the comment and turn the rest of the path into SQL.
CREATE OR REPLACE VIEW dataset AS
SELECT {columns}
FROM read_parquet({files});
