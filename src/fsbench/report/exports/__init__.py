"""The exports: JSON, CSV per result and per sample, markdown."""
