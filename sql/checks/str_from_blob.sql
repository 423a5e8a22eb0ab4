-- violation of a lax str field by a BLOB column: pydantic decodes bytes as UTF-8 and refuses
-- bytes that are not UTF-8 (DuckDB's decode refuses the same: overlong forms, surrogates)
{value} IS NOT NULL AND try(decode({value})) IS NULL
