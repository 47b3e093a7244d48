"""The figures: what the model decided, drawn."""
