"""The API's Lambda TOKEN authorizer."""
