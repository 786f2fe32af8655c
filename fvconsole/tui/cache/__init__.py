"""View 3, Shard cache: the table, the eviction dialog and flow, verify, and their wording."""
