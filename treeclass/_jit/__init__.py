"""Transforms of functions: `tc.jit` (methods with a traced `self`), retrace explanations,
the errors naming `Class.field` for untraceable leaves, and `tc.bind`."""
