-- violation of Field(le=...) (the nan part: as in ge.sql)
{nan}{value} > {bound}
