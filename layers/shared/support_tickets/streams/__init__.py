"""The stream functions: exactly-once aggregate counts and the audit trail, from the table's stream."""
