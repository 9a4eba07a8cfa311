"""The local stack: `template.yaml` served on one machine, no AWS, no Docker.

See docs/local-stack.md. It reads the template through :mod:`stack_model` and
may use the operator commands of :mod:`ops`; neither imports it.
"""
