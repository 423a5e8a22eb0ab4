-- Rows holding a duplicated value of one column, counted per shard (run only when the
-- uniqueness check found duplicates).
WITH duplicated AS (
    SELECT {value} AS v
    FROM {rows}
    WHERE {value} IS NOT NULL AND NOT ({holds_nan})
    GROUP BY {value}
    HAVING count(*) > 1
)
SELECT "__undertale_shard" AS shard, count(*) AS violations
FROM {rows}
WHERE {value} IN (SELECT v FROM duplicated)
GROUP BY ALL
