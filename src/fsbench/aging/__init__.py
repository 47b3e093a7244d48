"""Aged images (`--age`): the recipe that ages a format, the cache of aged images, what aging
did to an image, and the lab's side of it (docs/aging.md)."""
