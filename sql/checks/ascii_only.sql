-- violation of ascii_only=True (StringConstraints, constr): a character beyond ASCII, so the
-- string's UTF-8 takes more bytes (strlen) than it has characters (length)
strlen({value}) <> length({value})
