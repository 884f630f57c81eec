"""Helpers for the tests: servers and clusters they start themselves."""
