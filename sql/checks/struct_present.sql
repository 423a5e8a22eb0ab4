-- violation of a lax nested model with extra="forbid" by a STRUCT holding a field it does not
-- name: pydantic refuses each struct that is there (a NULL struct, or an empty list, holds none)
{value} IS NOT NULL
