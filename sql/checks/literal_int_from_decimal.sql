-- violation of a lax Literal[...] (or Enum) of ints by a DECIMAL column: pydantic takes an
-- integral Decimal equal to an allowed int (1.00 for 1 and for True); 1.50 is refused
{value} <> trunc({value}) OR NOT list_contains({bound}, CAST({value} AS HUGEINT))
