-- A side table of a view, read from a CSV file (types detected by DuckDB). DuckDB cannot bind
-- parameters inside a view, so the path arrives as a quoted literal, the name quoted.
CREATE OR REPLACE VIEW {table} AS
SELECT * FROM read_csv({path});
