-- Pin the time zone every connection computes TIMESTAMPTZ values in (year(), strftime(),
-- + INTERVAL of a TIMESTAMPTZ): a view's rows are then the same in every process and on
-- every machine. Needs DuckDB's icu extension; without it DuckDB computes them in UTC.
SET TimeZone = 'UTC';
