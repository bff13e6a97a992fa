"""memgym package."""
