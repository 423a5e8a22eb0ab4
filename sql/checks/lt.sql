-- violation of Field(lt=...)
{value} >= {bound}
