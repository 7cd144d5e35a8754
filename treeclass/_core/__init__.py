"""The class machinery: `@treeclass` and `TreeClass`, fields, the per-class layout, the
generated `__init__` / `replace` / unflatten, construction checks, equality and repr."""
