"""Commands that live in modules of their own; cli.py registers them with add_command."""
