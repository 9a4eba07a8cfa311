"""Foundations every other folder may import: errors, keys, ids, clock, settings, tracing, models, identity."""
