-- Decode every value of every column of one shard (hash() forces decoding; count(*) alone
-- could be answered from the footer), to tell an unreadable shard from a failing check.
SELECT count(*) AS row_count, max(hash(COLUMNS(*)))
FROM read_parquet($path)
