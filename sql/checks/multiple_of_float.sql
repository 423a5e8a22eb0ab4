-- violation of Field(multiple_of=...) on a float, as pydantic judges it: the value is more
-- than 1e-9 away from the nearest multiple (NaN and infinities pass). An exact remainder
-- (multiple_of.sql) would refuse 0.3 as a multiple of 0.1.
NOT isnan({value}::DOUBLE - round({value}::DOUBLE / {bound}) * {bound})
    AND abs({value}::DOUBLE - round({value}::DOUBLE / {bound}) * {bound}) > 1e-9
