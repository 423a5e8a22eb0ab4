-- violation of Field(lt=...) (the nan part: as in ge.sql)
{nan}{value} >= {bound}
