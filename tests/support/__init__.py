"""Helpers shared by the tests: data generators, planted files, servers, child processes."""
