"""`fsbench tune`: the remedies table, how candidates are chosen and grouped, the runs that
measure them and what they found (docs/tune.md)."""
