"""Renderers over finished run records: terminal tables (and later HTML). No measurement."""
