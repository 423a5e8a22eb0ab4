-- DuckDB's built-in functions with their kind and, for macros, their definition: the read-only
-- check refuses every macro that calls a refused function.
SELECT function_name, function_type, macro_definition
FROM duckdb_functions()
