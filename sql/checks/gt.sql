-- violation of Field(gt=...) (the nan part: as in ge.sql)
{nan}{value} <= {bound}
