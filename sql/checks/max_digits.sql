-- violation of Field(max_digits=...) on a DECIMAL column: more digits than allowed
{digits} > {bound}
