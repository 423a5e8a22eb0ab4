-- a map with a key or a value that holds a NaN (each test is on one item, named so)
coalesce(list_bool_or(list_transform(map_keys({value}), lambda {item}: {key_test})), false)
OR coalesce(list_bool_or(list_transform(map_values({value}), lambda {item}: {test})), false)
