-- SQL text back from a syntax tree in json_serialize_sql's form (a view's rewritten query).
SELECT json_deserialize_sql($tree) AS text
