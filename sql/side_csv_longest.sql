-- The longest value of each column of a CSV side table in bytes, in the columns' order: one
-- streaming pass that keeps lengths only (a join may repeat any value in every row).
SELECT max(strlen(CAST(COLUMNS(*) AS VARCHAR)))
FROM read_csv($path);
