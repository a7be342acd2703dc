"""File formats (I/O only; no math here). Nothing is ever pickled."""
