-- The `dataset` view's rows where shards have drifted: runs of shards read alike
-- (dataset_read.sql each, joined by UNION ALL, in shard order), each led by a constant
-- column this select leaves out. A query that reads no column of the dataset (count(*))
-- then reads that one, not the first column of the runs, whose conversion may stop the
-- query on a value that does not fit.
SELECT {columns}
FROM ({runs})
