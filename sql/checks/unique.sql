-- Uniqueness of one column over every shard: how many values occur more than once, and how
-- many rows hold such a value. NULLs are left to the not_null check.
SELECT count(*) AS duplicated_values, coalesce(sum(n), 0) AS duplicated_rows
FROM (
    SELECT {value} AS v, count(*) AS n
    FROM {rows}
    WHERE {value} IS NOT NULL
    GROUP BY {value}
    HAVING count(*) > 1
)
