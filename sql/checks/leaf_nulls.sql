-- Footer statistics of every leaf column (no data pages): for each leaf, how many column
-- chunks exist and how many record zero nulls. A column whose leaves record zero nulls in
-- every chunk holds no NULL value (and, for a list, no NULL element), so its null checks
-- need no scan.
SELECT path_in_schema, count(*) AS chunks, count_if(stats_null_count = 0) AS without_nulls
FROM parquet_metadata($files)
GROUP BY path_in_schema
