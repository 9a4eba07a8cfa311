"""Lambda's event sources, as the local stack runs them: the DynamoDB stream
sources of the template (:mod:`local_stack.event_sources.stream_sources`) and
their poller (``stream_poller``), the SQS event sources (``sqs_poller``), the
thread both pollers share (``polling_thread``), and CloudWatch Logs
subscription filters (``log_subscriptions``).
"""
