-- A few rows holding a duplicated value, grouped by value so each duplicate shows its rows.
WITH duplicated AS (
    SELECT {value} AS v
    FROM {rows}
    WHERE {value} IS NOT NULL AND NOT ({holds_nan})
    GROUP BY {value}
    HAVING count(*) > 1
)
SELECT
    $offsets[list_position($paths, "__undertale_shard")] + file_row_number AS "index",
    "__undertale_shard" AS shard,
    file_row_number AS "row",
    {value} AS "value"
FROM {rows}
WHERE {value} IN (SELECT v FROM duplicated)
ORDER BY "value", "index"
LIMIT $limit
