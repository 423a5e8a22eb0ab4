-- The partitioned uniqueness check, reduce side: over one partition's rows (unique_keys, every
-- row of each of its values), the rows holding a duplicated value, counted per shard number.
WITH duplicated AS (
    SELECT v
    FROM unique_keys
    GROUP BY v
    HAVING count(*) > 1
)
SELECT shard, count(*) AS violations
FROM unique_keys
WHERE v IN (SELECT v FROM duplicated)
GROUP BY shard
