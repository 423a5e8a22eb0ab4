-- violation of Field(min_length=...): the length function is length, octet_length, len or cardinality
{length}({value}) < {bound}
