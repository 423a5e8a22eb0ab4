-- violation of Field(le=...)
{value} > {bound}
