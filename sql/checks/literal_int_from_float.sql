-- violation of a lax Literal[...] (or Enum) of ints by a float column: pydantic takes a float
-- equal, as Python compares them, to an allowed int (1.0 for 1 and for True, -0.0 for 0);
-- 1.5, NaN, infinities and other ints are refused (from 2^127 on, no bound int is that large)
isnan({value}) OR isinf({value}) OR {value} <> trunc({value})
    OR abs({value}) >= 170141183460469231731687303715884105728.0
    OR NOT list_contains({bound}, TRY_CAST({value} AS HUGEINT))
