"""Lambda, as the local stack stands in for it: execution environments, a
process per environment (:mod:`local_stack.lambda_.environments`), and the
runtime each one runs before the function's code (:mod:`local_stack.lambda_.runtime`).
"""
