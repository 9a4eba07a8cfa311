"""`template.yaml` read as a model of the stack, for everything that is not the
deployed code: the local stack, the operator commands, the tests and the
benchmarks.

It belongs to neither the local stack nor ``ops``: both import it, it imports
neither (only the layer). The rule is tests/unit/test_package_direction.py:
support_tickets <- stack_model <- ops <- local_stack.
"""
