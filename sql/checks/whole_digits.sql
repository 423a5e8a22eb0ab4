-- violation of max_digits and decimal_places together: more digits before the point than
-- max_digits - decimal_places (the bound, at least 0)
{digits} - {places} > {bound}
