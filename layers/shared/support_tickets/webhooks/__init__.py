"""Tenants' webhooks, from registration to delivery."""
