-- violation inside a list (or array): some item violates the test, which is on one item,
-- named so (NULL items and empty or NULL lists violate nothing here: not_null decides)
coalesce(list_bool_or(list_transform({value}, lambda {item}: {test})), false)
