-- The partitioned uniqueness check, last step: the report's examples from every partition's
-- candidates (unique_keys then holds those), in the single query's order (by value, then index).
SELECT v, "index", shard
FROM unique_keys
ORDER BY v, "index"
LIMIT $limit
