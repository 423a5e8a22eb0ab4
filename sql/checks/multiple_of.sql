-- violation of Field(multiple_of=...)
{value} % {bound} <> 0
