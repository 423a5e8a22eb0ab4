-- violation of Field(allow_inf_nan=False) (or the model's allow_inf_nan=False config) on a
-- float column: the value is NaN or an infinity
isnan({value}) OR isinf({value})
