-- A few offending rows of one check, in dataset order: global index, shard, local row, value.
-- $offsets[k] is the global index of the first row of the k-th file of $paths (the real
-- paths; $files holds them escaped for read_parquet's glob). A view joining side tables
-- orders by index (a scan alone keeps dataset order).
SELECT
    $offsets[list_position($paths, "__undertale_shard")] + file_row_number AS "index",
    "__undertale_shard" AS shard,
    file_row_number AS "row",
    {value} AS "value"
FROM {rows}
WHERE {violation}
{order}LIMIT $limit
