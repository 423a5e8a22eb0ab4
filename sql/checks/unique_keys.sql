-- The partitioned uniqueness check, map side: the non-NULL values of one column in some shards
-- with each row's global index and shard number, and the partition of the value (a hash of it,
-- so every row holding one value lands in one partition, whichever shard it is in).
-- $numbers[k] and $offsets[k] are the shard number and the global index of the first row of
-- the k-th file of $paths.
SELECT
    {value} AS v,
    $offsets[list_position($paths, "__undertale_shard")] + file_row_number AS "index",
    $numbers[list_position($paths, "__undertale_shard")] AS shard,
    hash({value}) % $parts AS part
FROM {rows}
WHERE {value} IS NOT NULL AND NOT ({holds_nan})
