-- A column of one shard that no value of converts to the dataset's type (no cast, or a
-- time zone given or taken away; core/source/convert.py): a value stops the read with the
-- shard's SourceError, a NULL is NULL.
CASE
    WHEN {column} IS NULL THEN CAST(NULL AS {target})
    ELSE error({message})
END
