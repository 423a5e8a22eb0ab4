-- a float value that is NaN: Python finds it equal to nothing, not even another NaN
isnan({value})
