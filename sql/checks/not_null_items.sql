-- violation: a fixed-length tuple[X, Y | None] holds a NULL at a position whose type is not
-- optional (the bound lists those positions, counted from 1); a NULL tuple is not_null's
{value} IS NOT NULL
AND coalesce(list_bool_or(list_transform({bound}, lambda {item}: {value}[{item}] IS NULL)), false)
