"""Scale: logical axis rules and the `PartitionSpec` / `NamedSharding` trees of `tc.shardings`."""
