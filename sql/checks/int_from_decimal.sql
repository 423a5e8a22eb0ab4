-- violation of a lax int field by a DECIMAL column: pydantic takes only an integral Decimal
-- (1.00 is 1, 1.50 is refused)
{value} <> trunc({value})
