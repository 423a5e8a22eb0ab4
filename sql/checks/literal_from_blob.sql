-- violation of a lax str Enum by a BLOB column: pydantic decodes UTF-8 bytes and takes the
-- text of a member's value (b"a" for "a"); bytes that are not UTF-8 are refused
{value} IS NOT NULL AND coalesce(NOT list_contains({bound}, try(decode({value}))), true)
