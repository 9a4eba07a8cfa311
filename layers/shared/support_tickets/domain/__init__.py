"""What each route does, for a caller: the domain operations the handlers call."""
