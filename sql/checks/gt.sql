-- violation of Field(gt=...)
{value} <= {bound}
