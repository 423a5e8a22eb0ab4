-- a BOOLEAN value as the number lax pydantic makes of it for an int or float field (True is
-- 1, False 0), so ranges and multiples compare it as a number
CAST({value} AS INTEGER)
