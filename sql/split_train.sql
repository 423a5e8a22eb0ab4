-- A row is in the train part of a split (docs/packing.md#splits) when the first 16 hex
-- digits of md5('<seed>:' || its key as text) are at or above the fraction's threshold
-- (split_validation.sql is the exact complement). A null key gives 'n', after every hex
-- digit: such rows are always in the train part.
coalesce(substr(md5({prefix} || CAST({key} AS VARCHAR)), 1, 16), 'n') >= {threshold}
