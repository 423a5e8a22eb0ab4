-- The columns of a CSV side table with their DuckDB types, as the view reads it (types
-- detected by DuckDB, as side_csv.sql).
SELECT column_name, column_type
FROM (DESCRIBE SELECT * FROM read_csv($path));
