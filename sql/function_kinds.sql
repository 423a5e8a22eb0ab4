-- DuckDB's functions with their kind and stability: a view refuses aggregates and
-- non-deterministic functions (core/view.py).
SELECT lower(function_name), function_type, stability
FROM duckdb_functions()
