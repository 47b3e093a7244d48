"""The records a run keeps: results.json's schema (schema.py), the SQLite store that mirrors
it (store.py), the notes as codes (notecodes.py), the tune's record (tunerecord.py), the
probes' catalogue (probes/: what each probe collects and explains) and the one form of a
table of named records (choices.py). Measurement writes them; reporting only reads them."""
