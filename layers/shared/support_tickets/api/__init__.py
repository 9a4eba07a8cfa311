"""The HTTP edge of the REST functions: the Powertools resolver and the one exception-to-response table."""
