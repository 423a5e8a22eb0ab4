-- the digits pydantic counts in a DECIMAL value, which it normalizes first: the digits of
-- the integer part and of the fraction without its trailing zeros, leading zeros left out,
-- and at least the decimal places (0.05 has two); zero written without a fraction has one
-- digit, zero with one (0.00) none, as pydantic counts them. The sign is trimmed from the
-- text, not taken off by abs(), which overflows on an integer type's minimum (-2**63)
greatest(
    length(ltrim(
        split_part(ltrim(CAST({value} AS VARCHAR), '-'), '.', 1)
            || rtrim(split_part(CAST({value} AS VARCHAR), '.', 2), '0'),
        '0'
    )),
    length(rtrim(split_part(CAST({value} AS VARCHAR), '.', 2), '0')),
    (ltrim(CAST({value} AS VARCHAR), '-') = '0')::INTEGER
)
