-- the decimal places pydantic counts in a DECIMAL value: its fraction's digits without the
-- trailing zeros (pydantic normalizes the Decimal; 1.50 has one place)
length(rtrim(split_part(CAST(abs({value}) AS VARCHAR), '.', 2), '0'))
