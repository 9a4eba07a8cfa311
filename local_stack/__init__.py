"""The local stack: `template.yaml` served on one machine, no AWS, no Docker.

See docs/local-stack.md. ``template`` reads the SAM template; the rest
(emulator, IAM guard, API Gateway emulation, stream poller) builds on it.
"""
