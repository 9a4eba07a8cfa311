"""Foundations every other folder may import; it imports none of them."""
