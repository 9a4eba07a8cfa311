"""Cognito, as the local stack stands in for it: the user pool
(:mod:`local_stack.cognito.user_pool`, moto's made strict) and the identity
pool (:mod:`local_stack.cognito.identity_pool`, tenant credentials from a
verified ID token).
"""
