-- A view's columns and their DuckDB types, as ad hoc SQL sees dataset_view.
SELECT column_name, column_type FROM (DESCRIBE dataset_view)
