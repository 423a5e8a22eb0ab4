-- A drifting column's value cast to the dataset's type and back to its own (drift_cast.sql).
TRY_CAST(TRY_CAST({column} AS {target}) AS {own})
