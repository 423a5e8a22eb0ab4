-- The DuckDB types of a view's columns over one shard: binding reads only footers, no rows
-- are scanned.
SELECT * EXCLUDE ("__undertale_shard", file_row_number)
FROM {rows}
LIMIT 0
