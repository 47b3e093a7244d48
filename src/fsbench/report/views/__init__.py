"""The views: the terminal, the page and their sections, formatting the model."""
