-- Set the optimizers a database plans without (a comma-separated list of names, bound as
-- $names). Global to the database: DuckDB refuses it per session. Used by
-- core/runtime/duck.py's planned_as_configured around a query that reads no row.
SET disabled_optimizers = $names;
