"""Training: which leaves are trainable and what `where=` / `filter=` select,
`tc.partition` / `tc.combine`, `tc.grad` / `tc.value_and_grad` / `tc.apply_updates`, and
`tc.summary`."""
