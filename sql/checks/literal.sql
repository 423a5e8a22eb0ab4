-- violation of Literal[...]: the value is not one of the allowed values
NOT list_contains({bound}, {value})
