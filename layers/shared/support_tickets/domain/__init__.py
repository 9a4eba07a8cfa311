"""What each route does, for a caller."""
