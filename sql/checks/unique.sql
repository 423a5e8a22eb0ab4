-- Uniqueness of one column over every shard: how many values occur more than once, and how
-- many rows hold such a value. NULLs are left to the not_null check. Values compare as Python
-- compares them: the nan condition is true for a value holding a float NaN, which equals
-- nothing (DuckDB would group NaN with NaN), while -0.0 and 0.0 are one value in both.
SELECT count(*) AS duplicated_values, coalesce(sum(n), 0) AS duplicated_rows
FROM (
    SELECT {value} AS v, count(*) AS n
    FROM {rows}
    WHERE {value} IS NOT NULL AND NOT ({holds_nan})
    GROUP BY {value}
    HAVING count(*) > 1
)
