"""IAM and STS, as the local stack stands in for them: the guard in front of the
emulator (:mod:`local_stack.iam.guard`) and what it decides with: SigV4
verification and the issued credentials (``sigv4``, ``sessions``), what a
request asks (``protocol_requests``, ``dynamodb_authorization``,
``service_authorization``, ``kms_via_dynamodb``), the condition keys
(``condition_keys``), policy evaluation (``policy_evaluation``), STS's
``AssumeRole`` (``sts``) and the refusals worded as AWS words them
(``protocol_answers``).
"""
