"""SigV4 verification: is a request signed with the secret of the key it names?

The emulator issued every secret its callers hold (the operator's fixed pair,
the execution roles' AssumeRole credentials, the identity pool's tenant
credentials; :class:`local_stack.iam.sessions.Sessions` keeps them), so it checks
each request's signature as AWS does, in both of SigV4's forms:

- the ``Authorization`` header (``AWS4-HMAC-SHA256 Credential=...,
  SignedHeaders=..., Signature=...``), the timestamp from ``X-Amz-Date`` (or
  ``Date``), the session token from ``X-Amz-Security-Token``;
- the presigned query string (``X-Amz-Algorithm``, ``X-Amz-Credential``,
  ``X-Amz-Date``, ``X-Amz-Expires``, ``X-Amz-SignedHeaders``,
  ``X-Amz-Signature``, ``X-Amz-Security-Token``).

The expected signature is botocore's (:class:`botocore.auth.SigV4Auth`), over
the request rebuilt exactly as it was received: the method, the path as sent
(werkzeug's ``RAW_URI``), the query, the headers ``SignedHeaders`` lists with
their received values (``Host`` with its port) and the SHA-256 of the body;
compared with :func:`hmac.compare_digest`. Derived signing keys are cached per
(secret, date, region, service), as a client's are, so a check costs two
SHA-256 and one HMAC.

Refusals, each with AWS's code for the service's protocol (:func:`refusal`):

- **malformed** (an ``Authorization`` that is not SigV4's three parts, a
  scope that is not ``key/date/region/service/aws4_request``, no timestamp,
  both forms at once): ``IncompleteSignature(Exception)``;
- **unknown key**, or a session token that is not the key's (missing, wrong,
  or given with the operator's long-term key): ``UnrecognizedClientException``
  (JSON), ``InvalidClientTokenId`` (query, SQS), "The security token included
  in the request is invalid.";
- **a timestamp too far from the emulator's clock** (15 minutes for DynamoDB
  and STS, as their answers say "- 15 min.", 5 for other services, the IAM
  User Guide's "within five minutes"), or a presigned URL past its
  ``X-Amz-Expires``: ``InvalidSignatureException`` / ``SignatureDoesNotMatch``
  with AWS's "Signature expired: ..." wording;
- **a wrong signature** (wrong secret, tampered body, header, path or query):
  ``InvalidSignatureException`` / ``SignatureDoesNotMatch``, "The request
  signature we calculated does not match the signature you provided. ...".
"""

from __future__ import annotations

import enum
import functools
import hashlib
import hmac
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, unquote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials as BotocoreCredentials

from local_stack.iam.protocol_answers import JSON_1_0, QUERY_NAMESPACES, Answer, answer, json_error, xml_error

ALGORITHM = "AWS4-HMAC-SHA256"
_TIMESTAMP = "%Y%m%dT%H%M%SZ"
# How far a request's timestamp may be from the clock: DynamoDB and STS answer
# "... - 15 min."; the IAM User Guide's rule for the others is five minutes.
_SKEW_MINUTES = {"dynamodb": 15, "sts": 15}
DEFAULT_SKEW_MINUTES = 5
MAX_PRESIGNED_EXPIRES = 604800  # seven days, SigV4's longest presigned URL

INVALID_TOKEN = "The security token included in the request is invalid."  # noqa: S105 - AWS's message
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
)


@dataclass(frozen=True)
class Credentials:
    """A key the emulator issued: its secret, and its session token (``None``
    for the operator's long-term key)."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


class Failure(enum.Enum):
    INCOMPLETE = "incomplete"  # not a SigV4 request AWS could read
    UNKNOWN_KEY = "unknown key"  # no such key, or not its session token
    EXPIRED = "expired"  # the timestamp is too far from the clock
    MISMATCH = "mismatch"  # the signature is not the secret's


class SignatureError(Exception):
    def __init__(self, failure: Failure, message: str) -> None:
        super().__init__(message)
        self.failure = failure
        self.message = message


@dataclass(frozen=True)
class Signed:
    """A request whose signature verified: the key, and the credential
    scope's region and service (as sent)."""

    access_key: str
    region: str
    service: str
    presigned: bool
    # SigV4's three parts, for the header form moto dispatches by.
    credential: str
    signed_headers: str
    signature: str

    def authorization(self) -> str:
        parts = f"Credential={self.credential}, SignedHeaders={self.signed_headers}, Signature={self.signature}"
        return f"{ALGORITHM} {parts}"


Lookup = Callable[[str], Credentials | None]


# ---------------------------------------------------------------- reading a request
def is_signed(environ: Mapping[str, Any]) -> bool:
    """Whether the request carries a signature in either form (else it is unsigned)."""
    return bool(environ.get("HTTP_AUTHORIZATION")) or any(
        name in _query_names(environ) for name in ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature")
    )


def query_pairs(environ: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The query's parameters, percent-decoded (not ``+``: SigV4 encodes a space as %20)."""
    query = str(environ.get("QUERY_STRING", ""))
    pairs = []
    for part in query.split("&") if query else []:
        name, _, value = part.partition("=")
        pairs.append((unquote(name), unquote(value)))
    return pairs


def _query_names(environ: Mapping[str, Any]) -> set[str]:
    return {name for name, _ in query_pairs(environ)}


def _incomplete(message: str) -> SignatureError:
    return SignatureError(Failure.INCOMPLETE, message)


def _authorization_parts(header: str) -> dict[str, str]:
    algorithm, _, rest = header.partition(" ")
    if algorithm != ALGORITHM:
        raise _incomplete(f"Authorization header must use the {ALGORITHM} algorithm.")
    parts: dict[str, str] = {}
    for part in rest.split(","):
        name, equals, value = part.strip().partition("=")
        if not equals or name in parts:
            pair = part.strip()
            raise _incomplete(f"'{pair}' not a valid key=value pair (missing equal-sign) in Authorization header.")
        parts[name] = value
    if set(parts) != {"Credential", "SignedHeaders", "Signature"}:
        raise _incomplete("Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.")
    return parts


@dataclass(frozen=True)
class _Received:
    credential: str
    signed_headers: str
    signature: str
    timestamp: str
    session_token: str | None
    expires: int | None  # presigned: X-Amz-Expires
    query: list[tuple[str, str]]  # what the signature covers


def _received(environ: Mapping[str, Any]) -> _Received:
    pairs = query_pairs(environ)
    query = dict(pairs)
    header = str(environ.get("HTTP_AUTHORIZATION", ""))
    presigned = "X-Amz-Signature" in query or "X-Amz-Credential" in query or "X-Amz-Algorithm" in query
    if header and presigned:
        raise _incomplete("Only one auth mechanism allowed: the Authorization header or the X-Amz- query parameters.")
    if header:
        parts = _authorization_parts(header)
        timestamp = str(environ.get("HTTP_X_AMZ_DATE", ""))
        if not timestamp and environ.get("HTTP_DATE"):
            try:
                timestamp = parsedate_to_datetime(str(environ["HTTP_DATE"])).astimezone(UTC).strftime(_TIMESTAMP)
            except (TypeError, ValueError) as exc:
                raise _incomplete("Date must be in RFC 1123 format.") from exc
        token = environ.get("HTTP_X_AMZ_SECURITY_TOKEN")
        return _Received(
            parts["Credential"],
            parts["SignedHeaders"],
            parts["Signature"],
            timestamp,
            str(token) if token is not None else None,
            None,
            pairs,
        )
    wanted = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders")
    missing = [name for name in (*wanted, "X-Amz-Signature") if name not in query]
    if missing:
        raise _incomplete(f"AWS query-string parameters missing: {', '.join(missing)}.")
    if query["X-Amz-Algorithm"] != ALGORITHM:
        raise _incomplete(f"X-Amz-Algorithm must be {ALGORITHM}.")
    given = [name for name, _ in pairs if name in (*wanted, "X-Amz-Signature", "X-Amz-Security-Token")]
    if len(given) != len(set(given)):
        raise _incomplete("Each X-Amz- query-string parameter may be given once.")
    try:
        expires = int(query["X-Amz-Expires"])
    except ValueError as exc:
        raise _incomplete("X-Amz-Expires must be a number of seconds.") from exc
    if not 0 < expires <= MAX_PRESIGNED_EXPIRES:
        raise _incomplete(f"X-Amz-Expires must be between 1 and {MAX_PRESIGNED_EXPIRES} seconds.")
    return _Received(
        query["X-Amz-Credential"],
        query["X-Amz-SignedHeaders"],
        query["X-Amz-Signature"],
        query["X-Amz-Date"],
        query.get("X-Amz-Security-Token"),
        expires,
        [(name, value) for name, value in pairs if name != "X-Amz-Signature"],
    )


# ---------------------------------------------------------------- the check
def verify(environ: Mapping[str, Any], body: bytes, lookup: Lookup, now: datetime | None = None) -> Signed:
    """The verified signer of a signed request (:func:`is_signed`), else
    :class:`SignatureError`. ``lookup`` finds the credentials of a key."""
    received = _received(environ)
    scope = received.credential.split("/")
    if len(scope) != 5 or scope[4] != "aws4_request" or not all(scope):
        raise _incomplete(f"Credential should be scoped to a valid region, service and date: '{received.credential}'.")
    access_key, date, region, service, _ = scope
    credentials = lookup(access_key)
    if credentials is None or not _same_token(credentials.session_token, received.session_token):
        raise SignatureError(Failure.UNKNOWN_KEY, INVALID_TOKEN)
    stamp = _timestamp(received.timestamp)
    if date != received.timestamp[:8]:
        raise SignatureError(
            Failure.MISMATCH,
            f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
            f"'{date}' != '{received.timestamp[:8]}', from '{received.timestamp}'.",
        )
    _check_time(stamp, received.expires, service, now or datetime.now(UTC))
    names = received.signed_headers.split(";")
    if not received.signed_headers or names != sorted(set(names)) or any(name != name.lower() for name in names):
        raise SignatureError(Failure.MISMATCH, SIGNATURE_MISMATCH)
    if "host" not in names or (received.expires is None and not {"x-amz-date", "date"} & set(names)):
        raise _incomplete("The host header and the request's date must be signed.")
    headers = HTTPHeaders()
    for name in names:
        value = _header(environ, name)
        if value is None:
            raise SignatureError(Failure.MISMATCH, SIGNATURE_MISMATCH)
        headers[name] = value
    payload = hashlib.sha256(body).hexdigest()
    expected = _Verifier(credentials, service, region, headers, payload).expected(
        str(environ.get("REQUEST_METHOD", "GET")), _raw_path(environ), received.query, received.timestamp
    )
    if not hmac.compare_digest(expected.encode(), received.signature.encode()):
        raise SignatureError(Failure.MISMATCH, SIGNATURE_MISMATCH)
    return Signed(
        access_key,
        region,
        service,
        received.expires is not None,
        received.credential,
        received.signed_headers,
        received.signature,
    )


def _same_token(issued: str | None, sent: str | None) -> bool:
    if issued is None or sent is None:
        return issued is None and sent is None
    return hmac.compare_digest(issued.encode(), sent.encode())


def _timestamp(text: str) -> datetime:
    if not text:
        raise _incomplete("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
    try:
        return datetime.strptime(text, _TIMESTAMP).replace(tzinfo=UTC)
    except ValueError as exc:
        raise _incomplete(f"Date must be in ISO-8601 'basic format'. Got '{text}'.") from exc


def _check_time(stamp: datetime, expires: int | None, service: str, now: datetime) -> None:
    def at(moment: datetime) -> str:
        return moment.strftime(_TIMESTAMP)

    if expires is not None:
        # A presigned URL: valid from its date for X-Amz-Expires seconds.
        if now > stamp + timedelta(seconds=expires):
            earliest = now - timedelta(seconds=expires)
            raise SignatureError(
                Failure.EXPIRED,
                f"Signature expired: {at(stamp)} is now earlier than {at(earliest)} ({at(now)} - {expires} sec.)",
            )
        skew = timedelta(minutes=DEFAULT_SKEW_MINUTES)
        minutes = DEFAULT_SKEW_MINUTES
    else:
        minutes = _SKEW_MINUTES.get(service.lower(), DEFAULT_SKEW_MINUTES)
        skew = timedelta(minutes=minutes)
        if stamp < now - skew:
            raise SignatureError(
                Failure.EXPIRED,
                f"Signature expired: {at(stamp)} is now earlier than {at(now - skew)} ({at(now)} - {minutes} min.)",
            )
    if stamp > now + skew:
        raise SignatureError(
            Failure.EXPIRED,
            f"Signature not yet current: {at(stamp)} is still later than {at(now + skew)} ({at(now)} + {minutes} min.)",
        )


def _header(environ: Mapping[str, Any], name: str) -> str | None:
    """A header's value as received (WSGI's ``CONTENT_TYPE``/``CONTENT_LENGTH``
    carry no ``HTTP_`` prefix)."""
    key = name.upper().replace("-", "_")
    if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        value = environ.get(key)
        return str(value) if value not in (None, "") else None
    value = environ.get(f"HTTP_{key}")
    return str(value) if value is not None else None


def _raw_path(environ: Mapping[str, Any]) -> str:
    """The path as the client sent it (percent-encoding included)."""
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        path = str(raw).split("?", 1)[0]
        if "://" in path:  # an absolute-form request target
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        return path or "/"
    return quote(str(environ.get("PATH_INFO", "")) or "/", safe="/~!$&'()*+,;=:@%")


@functools.lru_cache(maxsize=1024)
def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """SigV4's derived key (kDate, kRegion, kService, kSigning), once per day, region and service."""

    def sign(key: bytes, message: str) -> bytes:
        return hmac.new(key, message.encode(), hashlib.sha256).digest()

    return sign(sign(sign(sign(f"AWS4{secret}".encode(), date), region), service), "aws4_request")


class _Verifier(SigV4Auth):
    """botocore's signer over the request as received: exactly the headers it
    names, the body's hash, the cached derived key."""

    def __init__(self, credentials: Credentials, service: str, region: str, headers: HTTPHeaders, payload: str) -> None:
        keys = BotocoreCredentials(credentials.access_key_id, credentials.secret_access_key, credentials.session_token)
        super().__init__(keys, service, region)
        self._scope = (region, service)
        self._secret = credentials.secret_access_key
        self._headers = headers
        self._payload = payload

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        return self._headers

    def payload(self, request: AWSRequest) -> str:
        return self._payload

    def signature(self, string_to_sign: str, request: AWSRequest) -> str:
        key = _signing_key(self._secret, request.context["timestamp"][:8], *self._scope)
        return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()

    def expected(self, method: str, path: str, query: list[tuple[str, str]], timestamp: str) -> str:
        # Each name and value encoded as SigV4 encodes them; botocore sorts the pairs.
        encoded = "&".join(f"{quote(name, safe='-_.~')}={quote(value, safe='-_.~')}" for name, value in query)
        url = f"http://{self._headers['host']}{path}" + (f"?{encoded}" if encoded else "")
        request = AWSRequest(method=method, url=url)
        request.context["timestamp"] = timestamp
        canonical = self.canonical_request(request)
        return self.signature(self.string_to_sign(request, canonical), request)


# ---------------------------------------------------------------- AWS's answers
# (JSON protocol code, query protocol code, HTTP status of the query protocol's answer)
_CODES = {
    Failure.INCOMPLETE: ("IncompleteSignatureException", "IncompleteSignature", "400 Bad Request"),
    Failure.UNKNOWN_KEY: ("UnrecognizedClientException", "InvalidClientTokenId", "403 Forbidden"),
    Failure.EXPIRED: ("InvalidSignatureException", "SignatureDoesNotMatch", "403 Forbidden"),
    Failure.MISMATCH: ("InvalidSignatureException", "SignatureDoesNotMatch", "403 Forbidden"),
}


def refusal(error: SignatureError, *, service: str, target: str, content_type: str) -> Answer:
    """AWS's answer to a request whose signature does not verify, in the
    protocol of the service it was sent to: JSON (an ``X-Amz-Target``; SQS's
    query-compatible JSON with the query code), query (XML ``ErrorResponse``)
    or REST-JSON (API Gateway: ``x-amzn-ErrorType``, 403)."""
    json_code, query_code, query_status = _CODES[error.failure]
    request_id = str(uuid.uuid4())
    if target.startswith("AmazonSQS."):
        body = json.dumps({"__type": f"com.amazon.coral.service#{query_code}", "message": error.message}).encode()
        headers = [
            ("Content-Type", JSON_1_0),
            ("x-amzn-query-error", f"{query_code};Sender"),
            ("x-amzn-RequestId", request_id),
        ]
        return answer(query_status, headers, body)
    if target:
        kind = content_type if content_type.startswith("application/x-amz-json") else JSON_1_0
        return json_error(f"com.amazon.coral.service#{json_code}", error.message, content_type=kind)
    if service in QUERY_NAMESPACES or "x-www-form-urlencoded" in content_type:
        return xml_error(query_code, error.message, status=query_status, namespace=QUERY_NAMESPACES.get(service, ""))
    status = "400 Bad Request" if error.failure is Failure.INCOMPLETE else "403 Forbidden"
    body = json.dumps({"message": error.message}).encode()
    headers = [("Content-Type", "application/json"), ("x-amzn-ErrorType", json_code), ("x-amzn-RequestId", request_id)]
    return answer(status, headers, body)
