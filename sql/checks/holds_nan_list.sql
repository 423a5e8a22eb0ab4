-- a list (or array) holding an item that holds a NaN (the test is on one item, named so)
coalesce(list_bool_or(list_transform({value}, lambda {item}: {test})), false)
