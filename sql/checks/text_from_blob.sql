-- a BLOB value as the text lax pydantic decodes for a str field (NULL where it is not UTF-8,
-- a row the type check refuses), so lengths count characters and patterns match text
try(decode({value}))
