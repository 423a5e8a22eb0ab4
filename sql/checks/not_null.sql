-- violation: the value is NULL (the guard keeps a NULL parent struct out of nested checks)
{guard}{value} IS NULL
