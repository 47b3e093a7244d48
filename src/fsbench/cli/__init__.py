"""The command line: the click app (app.py), every measuring option in one table (options.py)
and the verbs that are more than a call (commands/). It parses, calls and renders; nothing is
measured or decided here."""
