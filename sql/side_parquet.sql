-- A side table of a view, read from a Parquet file. DuckDB cannot bind parameters inside a
-- view, so the path arrives as a quoted literal and the name as a quoted identifier.
CREATE OR REPLACE VIEW {table} AS
SELECT * FROM read_parquet({path});
