-- the UTC datetime lax pydantic makes of an integer (a Unix time: seconds up to 2e10 in
-- magnitude, milliseconds beyond), as a TIMESTAMP WITH TIME ZONE; NULL outside the years
-- 1 to 9999, which the type check refuses
CASE WHEN {value} BETWEEN -20000000000 AND 20000000000
        THEN timezone('UTC', make_timestamp(TRY_CAST({value} AS BIGINT) * 1000000))
    WHEN {value} BETWEEN -62135596800000 AND 253402300799999
        THEN timezone('UTC', make_timestamp(TRY_CAST({value} AS BIGINT) * 1000)) END
