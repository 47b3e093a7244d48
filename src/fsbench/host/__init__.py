"""This machine: what it is and has (environment.py: the environment stored with each run,
and `fsbench doctor`), and Debian packages fetched for what it lacks (apt.py)."""
