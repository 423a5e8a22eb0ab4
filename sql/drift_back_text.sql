-- Text cast to a float and back to text as Arrow writes a float (what conform() compares
-- for the plain rows): a whole number without the '.0' DuckDB writes (1, not 1.0).
regexp_replace(TRY_CAST(TRY_CAST({column} AS {target}) AS VARCHAR), '\.0$', '')
