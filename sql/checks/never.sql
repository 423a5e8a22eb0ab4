-- a check no value of the column's type can violate (allow_inf_nan=False on an integer or
-- DECIMAL column, which hold no NaN or infinity)
false
