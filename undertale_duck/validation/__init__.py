"""Validation: pydantic schemas as SQL checks over every shard, the report, its renderers."""
