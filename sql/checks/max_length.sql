-- violation of Field(max_length=...)
{length}({value}) > {bound}
