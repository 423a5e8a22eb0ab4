-- a number as the float pydantic makes of it for a float field (an int above 2**53 rounds to
-- the nearest float), so a bound compares what pydantic compares
CAST({value} AS DOUBLE)
