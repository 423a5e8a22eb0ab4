-- Exact per-column statistics of a view's rows by a full scan (describe --scan with a view).
-- The aggregates placeholder is built from quoted column identifiers, as in describe_scan.
-- No placeholder may appear in a comment.
SELECT count(*) AS "rows", {aggregates}
FROM dataset_view;
