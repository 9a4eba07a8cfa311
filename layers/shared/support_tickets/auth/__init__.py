"""The API's Lambda TOKEN authorizer: verifies the Cognito ID token and names the tenant's API key."""
