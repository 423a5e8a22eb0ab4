-- Exact per-column statistics of one shard by a full scan (describe --scan).
-- The aggregates are built from quoted column identifiers: for each column k,
-- the null count (n_k), and min/max (lo_k, hi_k) of values or, for lists, of lengths.
SELECT count(*) AS "rows", {aggregates}
FROM read_parquet($path);
