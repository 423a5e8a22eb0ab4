-- violation of Field(pattern=...): like pydantic, the pattern is searched, not anchored
NOT regexp_matches({value}, {bound})
