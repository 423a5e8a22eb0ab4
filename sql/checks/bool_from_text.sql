-- violation of a lax bool field by a text column: pydantic takes only these words, in any
-- case, without surrounding whitespace (no character beyond ASCII lowercases to one of
-- their letters, so lower() gives pydantic's verdict)
NOT (lower({value}) IN ('0', 'off', 'f', 'false', 'n', 'no', '1', 'on', 't', 'true', 'y', 'yes'))
