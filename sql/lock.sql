-- Freeze the settings of the database that runs ad hoc SQL (after the `dataset` view and any
-- confinement are in place): no query can change them, also not through a function.
SET lock_configuration = true;
