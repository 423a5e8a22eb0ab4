-- violation of Field(ge=...): the value is below the bound. For a float the nan part is
-- `isnan(value) OR `: pydantic refuses NaN against any bound, DuckDB sorts NaN above every number
{nan}{value} < {bound}
