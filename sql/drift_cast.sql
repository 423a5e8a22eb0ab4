-- A column of one shard converted to the dataset's type, where the shard's type differs
-- (schema drift between shards; core/source/convert.py). A value is served only when the
-- cast holds it and casting it back gives it again (NaN for NaN), as conform() checks the
-- plain dataset's rows; otherwise error() stops the read with the shard's SourceError:
-- the head text names the shard and the column, and the value follows. The value cast
-- back is drift_back.sql, or for text into a float drift_back_text.sql.
CASE
    WHEN {column} IS NULL THEN NULL
    WHEN TRY_CAST({column} AS {target}) IS NULL
        THEN error({head} || CAST({column} AS VARCHAR) || {fails})
    WHEN {back} IS DISTINCT FROM {column}
        THEN error({head} || CAST({column} AS VARCHAR) || {changes})
    ELSE CAST({column} AS {target})
END
