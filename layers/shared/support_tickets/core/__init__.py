"""Foundations every other folder may import: errors, keys, models, settings; it imports none of them."""
