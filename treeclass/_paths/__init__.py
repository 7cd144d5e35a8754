"""Nested paths: the selectors that `where=` functions are (recorded on a stand-in, followed
through an object with errors naming the path), and `tc.replace_at`."""
