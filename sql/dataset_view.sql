-- The `dataset` view over every shard. DuckDB cannot bind parameters inside a view, so the
-- shard paths arrive as lists of quoted literals (glob characters escaped) and the columns
-- as quoted identifiers. The reads are one dataset_read.sql over every shard, or, where
-- shards have drifted to other column types, one per run of shards read alike, joined by
-- UNION ALL in shard order (core/source/convert.py). No placeholder may appear in a
-- comment: a path holding a newline would end the comment and turn the rest into SQL.
CREATE OR REPLACE VIEW dataset AS
{reads};
