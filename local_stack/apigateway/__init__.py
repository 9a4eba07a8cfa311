"""API Gateway, as the local stack stands in for it: the REST API with its
Lambda authorizer and gateway responses (:mod:`local_stack.apigateway.rest_api`)
and its usage plans (:mod:`local_stack.apigateway.usage_plans`).
"""
