-- `dataset_view`: the rows of a view, for ad hoc SQL (ds.sql). The query is the user's,
-- which was parsed by DuckDB and checked to be a single row-by-row SELECT over dataset.
CREATE OR REPLACE VIEW dataset_view AS
{view};
