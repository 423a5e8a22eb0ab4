-- What a query could leave behind in the database that runs ad hoc SQL: tables (also
-- temporary ones, which would hide the `dataset` view), views and their definitions,
-- sequences, types, schemas and attached databases. Compared before and after each query.
SELECT 'table' AS kind, database_name, schema_name, table_name AS name, '' AS detail
FROM duckdb_tables()
UNION ALL
SELECT 'view', database_name, schema_name, view_name, sql
FROM duckdb_views()
WHERE NOT internal
UNION ALL
SELECT 'sequence', database_name, schema_name, sequence_name, ''
FROM duckdb_sequences()
UNION ALL
SELECT 'type', database_name, schema_name, type_name, ''
FROM duckdb_types()
WHERE NOT internal
UNION ALL
SELECT 'schema', database_name, schema_name, '', ''
FROM duckdb_schemas()
UNION ALL
SELECT 'database', database_name, '', '', coalesce(path, '')
FROM duckdb_databases()
