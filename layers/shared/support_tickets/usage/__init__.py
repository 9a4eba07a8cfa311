"""Usage and cost per tenant, from the request's meter to the report."""
