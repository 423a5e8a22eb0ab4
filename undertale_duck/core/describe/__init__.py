"""Describe a dataset from its footers, or a view from its query."""

from __future__ import annotations

from . import footers
from .footers import ColumnInfo, Description, describe
from .view import ViewDescription, describe_view

__all__ = [
    "ColumnInfo", "Description", "ViewDescription", "describe", "describe_view", "footers"
]
