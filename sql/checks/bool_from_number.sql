-- violation of a lax bool field by a number column (integer, float, DECIMAL): pydantic takes
-- only 0 and 1 (also 0.0, -0.0 and 1.0; NaN is refused)
NOT ({value} = 0 OR {value} = 1)
