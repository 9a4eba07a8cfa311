"""The embedded AWS: moto in server mode behind the IAM guard
(:mod:`local_stack.emulator.server`), the fixes where moto differs from AWS
(``moto_fixes``) and realistic ``ConsumedCapacity`` (``consumed_capacity``).
"""
