-- a struct with a field that holds a NaN (the tests, one per field, joined with OR)
coalesce({test}, false)
