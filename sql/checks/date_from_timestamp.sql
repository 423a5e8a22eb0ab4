-- violation of a lax date field by a timestamp column (without a time zone): pydantic takes
-- a datetime only when its time of day is exactly midnight (date_from_datetime_inexact)
epoch_us({value}) % 86400000000 <> 0
