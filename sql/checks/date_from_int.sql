-- violation of a lax date field by an integer column: pydantic takes an int as a Unix time
-- (seconds up to 2e10 in magnitude, milliseconds beyond, within the years 1 to 9999) only
-- when it is midnight UTC, a whole number of days
CASE WHEN {value} BETWEEN -20000000000 AND 20000000000 THEN {value} % 86400 <> 0
    ELSE {value} % 86400000 <> 0 OR {value} < -62135596800000 OR {value} > 253402300799999 END
