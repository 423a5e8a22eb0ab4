-- DuckDB's syntax tree of one SELECT statement as JSON (parsed only, never run), for the
-- read-only check of ad hoc SQL.
SELECT json_serialize_sql($query) AS tree
