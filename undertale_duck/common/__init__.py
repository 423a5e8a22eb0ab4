"""Conventions shared by every layer: JSON values, plain-text helpers."""
