-- violation of Field(decimal_places=...) on a DECIMAL column: more decimal places than allowed
{places} > {bound}
