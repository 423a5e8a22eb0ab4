-- Confine the database that runs ad hoc SQL to the dataset's own files: only $paths (each
-- shard as it is named and as read_parquet's escaped glob names it) may be opened; every
-- other file, directory, extension and attached database is refused by DuckDB itself.
SET allowed_paths = $paths;
SET enable_external_access = false;
