"""The lab: backing stores, formats, drivers, the mount lifecycle and cleanup."""
