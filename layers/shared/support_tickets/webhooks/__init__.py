"""Tenants' webhooks, from registration to delivery: events, URLs, records, parking, the fan-out, the delivery."""
