-- violation of a lax int field by a float column: pydantic takes only a finite, integral
-- float strictly between -2^63 and 2^63 (1.0 is 1; 1.5, NaN and infinities are refused)
isnan({value}) OR isinf({value}) OR {value} <> trunc({value})
    OR {value} <= -9223372036854775808.0 OR {value} >= 9223372036854775808.0
