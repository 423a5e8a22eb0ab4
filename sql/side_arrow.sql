-- A side table of a view passed as an Arrow table: copied into the database once per
-- process, so every cursor sees it (registered Arrow objects are private to one cursor).
CREATE OR REPLACE TABLE {table} AS
SELECT * FROM __ud_side_arrow;
