-- Exact per-column statistics of one shard by a full scan (describe --scan). The aggregates
-- placeholder is built from quoted column identifiers: for each column k, the null count
-- (n_k), and min/max (lo_k, hi_k) of values or, for lists, of lengths. No placeholder may
-- appear in a comment: a column name holding a newline would end the comment and run as SQL.
SELECT count(*) AS "rows", {aggregates}
FROM read_parquet($path);
