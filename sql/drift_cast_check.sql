-- Whether a column's conversion binds (its types only: no row is read).
SELECT {expression}
FROM (SELECT CAST(NULL AS {own}) AS {column})
LIMIT 0;
