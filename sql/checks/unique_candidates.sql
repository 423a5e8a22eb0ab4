-- The partitioned uniqueness check, reduce side: the first rows holding a duplicated value in
-- the order the single query's examples take (by value, then index). Over the candidates of
-- every partition (unique_keys then holds those) it gives the report's examples.
WITH duplicated AS (
    SELECT v
    FROM unique_keys
    GROUP BY v
    HAVING count(*) > 1
)
SELECT v, "index", shard
FROM unique_keys
WHERE v IN (SELECT v FROM duplicated)
ORDER BY v, "index"
LIMIT $limit
