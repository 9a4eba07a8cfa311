"""The HTTP edge of the REST functions."""
