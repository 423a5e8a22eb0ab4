-- Every per-row check (not null, range, length, pattern, literal, ...) over one group of
-- shards that share a schema (or a view over them: sql/checks/view_rows.sql), in a single
-- scan, counted per shard.
-- The counts placeholder holds one `count_if(<violation>) AS "cN"` per check; every value is a bound $pN.
SELECT "__undertale_shard" AS shard, count(*) AS row_count, {counts}
FROM {rows}
GROUP BY ALL
