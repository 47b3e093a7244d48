"""Tree hashing: `xxhsum -H2` manifests of any tree, hashed natively (manifest.py), and the
generated tree whose every digest is known (tree.py), which the tree-hash workload reads and
the integrity check re-reads."""
