-- violation of Field(ge=...): the value is below the bound
{value} < {bound}
