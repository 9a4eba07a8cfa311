"""The emulator's own answers, worded as the AWS services' protocols word them.

The guard (and the emulator's endpoint listener) answer some requests
themselves instead of moto: a refusal, a signature that does not verify, the
identity pool's calls. Each answer is an :data:`Answer`, the status, headers
and body a WSGI app answers, its ``Content-Length`` included:

- a JSON-protocol call's (an ``X-Amz-Target``, JSON 1.0 or 1.1):
  :func:`json_answer`, and its errors' ``{"__type", "message"}`` body,
  :func:`json_error`;
- a query-protocol call's error (STS, and SQS's query form): an XML
  ``ErrorResponse`` in the service's namespace, :func:`xml_error`.
"""

from __future__ import annotations

import json
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

# Status, headers and body, as a WSGI app answers.
Answer = tuple[str, list[tuple[str, str]], bytes]

JSON_1_0 = "application/x-amz-json-1.0"
# The XML namespaces of the query-protocol services the emulator answers for.
QUERY_NAMESPACES = {
    "sts": "https://sts.amazonaws.com/doc/2011-06-15/",
    "iam": "https://iam.amazonaws.com/doc/2010-05-08/",
    "sqs": "http://queue.amazonaws.com/doc/2012-11-05/",
}


def answer(status: str, headers: Sequence[tuple[str, str]], body: bytes) -> Answer:
    """``headers`` and the body's ``Content-Length``."""
    return status, [*headers, ("Content-Length", str(len(body)))], body


def json_answer(payload: Any, *, status: str = "200 OK", content_type: str = JSON_1_0) -> Answer:
    """A JSON-protocol answer, with a request id as AWS gives one."""
    headers = [("Content-Type", content_type), ("x-amzn-RequestId", str(uuid.uuid4()))]
    return answer(status, headers, json.dumps(payload).encode())


def json_error(
    error_type: str, message: str, *, status: str = "400 Bad Request", content_type: str = JSON_1_0
) -> Answer:
    """A JSON-protocol error: ``__type`` (the error code, maybe with its
    namespace, ``com.amazonaws.dynamodb.v20120810#AccessDeniedException``) and
    ``message``."""
    return json_answer({"__type": error_type, "message": message}, status=status, content_type=content_type)


def xml_error(code: str, message: str, *, status: str, namespace: str) -> Answer:
    """A query-protocol error: ``ErrorResponse`` with the ``Sender``'s error
    in the service's XML namespace (``""``: none)."""
    root = ET.Element("ErrorResponse", xmlns=namespace)
    error = ET.SubElement(root, "Error")
    ET.SubElement(error, "Type").text = "Sender"
    ET.SubElement(error, "Code").text = code
    ET.SubElement(error, "Message").text = message
    ET.SubElement(root, "RequestId").text = str(uuid.uuid4())
    return answer(status, [("Content-Type", "text/xml")], ET.tostring(root))
