-- a string as pydantic's strip_whitespace leaves it before its length and pattern checks:
-- Unicode White_Space removed from both ends (Rust's str::trim)
trim(
    {value},
    chr(9) || chr(10) || chr(11) || chr(12) || chr(13) || chr(32) || chr(133) || chr(160)
        || chr(5760) || chr(8192) || chr(8193) || chr(8194) || chr(8195) || chr(8196)
        || chr(8197) || chr(8198) || chr(8199) || chr(8200) || chr(8201) || chr(8202)
        || chr(8232) || chr(8233) || chr(8239) || chr(8287) || chr(12288)
)
