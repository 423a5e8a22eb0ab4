-- Compile a pattern once before the scan, so an invalid pattern is one failed check.
SELECT regexp_matches('', $pattern) AS ok
