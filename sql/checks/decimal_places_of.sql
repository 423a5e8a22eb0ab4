-- the decimal places pydantic counts in a DECIMAL value: its fraction's digits without the
-- trailing zeros (pydantic normalizes the Decimal; 1.50 has one place); the sign does not
-- reach the fraction, so the value is not passed through abs() (it overflows on -2**63)
length(rtrim(split_part(CAST({value} AS VARCHAR), '.', 2), '0'))
