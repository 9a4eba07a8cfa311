"""Operator and build tooling that runs outside Lambda (``python -m ops.<tool>``)."""
