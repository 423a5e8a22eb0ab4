-- violation of a fixed-length tuple[X, Y, ...]: a list of another number of items (the length
-- function is len for a list or array)
{length}({value}) <> {bound}
