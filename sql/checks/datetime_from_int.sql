-- violation of a lax datetime field (or AwareDatetime) by an integer column: pydantic takes an
-- int as a Unix time, in seconds up to 2e10 in magnitude and in milliseconds beyond, within
-- the years 1 to 9999 (a UTC datetime); every int of that range is taken
{value} < -62135596800000 OR {value} > 253402300799999
