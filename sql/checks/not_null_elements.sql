-- violation: a list holds a NULL element where the element type is not optional (list[int])
list_count({value}) < len({value})
