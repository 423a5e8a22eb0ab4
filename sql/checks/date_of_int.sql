-- the date lax pydantic makes of an integer at midnight UTC (a Unix time: seconds up to 2e10
-- in magnitude, milliseconds beyond); NULL outside the years 1 to 9999 (the type check
-- refuses those, and the ints that are not midnight)
CASE WHEN {value} BETWEEN -20000000000 AND 20000000000
        THEN CAST(make_timestamp(TRY_CAST({value} AS BIGINT) * 1000000) AS DATE)
    WHEN {value} BETWEEN -62135596800000 AND 253402300799999
        THEN CAST(make_timestamp(TRY_CAST({value} AS BIGINT) * 1000) AS DATE) END
