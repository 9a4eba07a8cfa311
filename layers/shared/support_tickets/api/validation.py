"""What a route accepts, and the check of a request against it.

Each function declares its input once (:class:`RouteInput`: the body's class,
whose ``SCHEMA`` is JSON Schema, and its query and header parameters, each
with a JSON Schema) and :func:`read_input` checks a request against it before
the route runs. The same declarations are the OpenAPI document's request
bodies and parameters (ops/openapi.py), so what is documented is what is
checked.

The checker knows the JSON Schema keywords our declarations use and refuses
any other when the declaration is made (:func:`check_schema`), so a keyword
can never be documented without being enforced. Patterns are anchored
(``^…$``) and must match the whole value: Python's ``$`` would otherwise let
a trailing newline through. Every failing field is reported, as
``{"field", "message"}`` details of a 400 ``VALIDATION_ERROR``; a body that is
not JSON is ``INVALID_JSON``.

Not pydantic: pydantic's import alone is more than a fifth of a cold start's
floor, and these few shapes need none of it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from support_tickets.core.digits import whole_number
from support_tickets.core.errors import InvalidJson, ValidationFailed
from support_tickets.core.models import JsonSchema

Detail = dict[str, str]

# What the checker enforces, and what only documents.
_ENFORCED: Final = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
        "minLength",
        "maxLength",
        "pattern",
        "enum",
        "minimum",
        "maximum",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
    }
)
_DOCUMENTING: Final = frozenset({"default", "description", "title"})
_TYPES: Final = frozenset({"object", "array", "string", "integer", "null"})
_CONSTRAINTS: Final = frozenset({"minLength", "maxLength", "pattern", "enum"})


class UnsupportedSchema(ValueError):
    """A declaration uses JSON Schema the checker does not enforce."""


def check_schema(schema: JsonSchema, where: str = "schema") -> None:
    """Refuse a keyword, type or pattern the checker would not enforce."""
    unknown = set(schema) - _ENFORCED - _DOCUMENTING
    if unknown:
        raise UnsupportedSchema(f"{where}: unsupported keyword(s) {sorted(unknown)}")
    types = _types(schema)
    if not types or not types <= _TYPES:
        raise UnsupportedSchema(f"{where}: type must be one or more of {sorted(_TYPES)}")
    pattern = schema.get("pattern")
    if pattern is not None and not (pattern.startswith("^") and pattern.endswith("$")):
        raise UnsupportedSchema(f"{where}: a pattern must be anchored with ^ and $")
    if schema.get("additionalProperties", False) is not False:
        raise UnsupportedSchema(f"{where}: objects are closed (additionalProperties: false)")
    for name, child in schema.get("properties", {}).items():
        check_schema(child, f"{where}.{name}")
    if "items" in schema:
        check_schema(schema["items"], f"{where}[]")


def _types(schema: JsonSchema) -> frozenset[str]:
    declared = schema.get("type")
    return frozenset([declared] if isinstance(declared, str) else declared or ())


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    # JSON Schema patterns are ECMA-262 regular expressions, whose \d, \w and \s
    # are ASCII; Python's are Unicode unless told (\d would take "٣" for 3).
    return re.compile(pattern, re.ASCII)


# bool before int: JSON's true is not a number here.
_JSON_TYPES: Final = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"))


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    for python_type, name in _JSON_TYPES:
        if isinstance(value, python_type):
            return name
    return "object" if isinstance(value, dict) else type(value).__name__


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def errors(schema: JsonSchema, value: Any, path: str) -> list[Detail]:
    """Every way ``value`` fails ``schema``, each named by its field's path
    (``ticket_ids.3``; the whole body is ``body``)."""
    given = _type_of(value)
    types = _types(schema)
    if given not in types:
        expected = " or ".join(sorted(types))
        return [{"field": path, "message": f"Input should be {'an' if expected[0] in 'aeiou' else 'a'} {expected}"}]
    if given == "string":
        return _string_errors(schema, value, path)
    if given == "integer":
        return _integer_errors(schema, value, path)
    if given == "array":
        return _array_errors(schema, value, path)
    if given == "object":
        return _object_errors(schema, value, path)
    return []


def _is_text(value: str) -> bool:
    # "\ud800" is valid JSON but not text: no UTF-8 for it, so nothing could store or show it.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _string_errors(schema: JsonSchema, value: str, path: str) -> list[Detail]:
    # A constrained string is text, counted in characters; an unconstrained one
    # (a cursor) is an opaque token its reader judges (a bad cursor is INVALID_CURSOR).
    if _CONSTRAINTS & set(schema) and not _is_text(value):
        return [{"field": path, "message": "Input should be text (it has a lone surrogate)"}]
    found: list[Detail] = []
    if "enum" in schema and value not in schema["enum"]:
        found.append({"field": path, "message": "Input should be " + ", ".join(f"'{v}'" for v in schema["enum"])})
    if len(value) < schema.get("minLength", 0):
        least = _plural(schema["minLength"], "character")
        found.append({"field": path, "message": f"String should have at least {least}"})
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        most = _plural(schema["maxLength"], "character")
        found.append({"field": path, "message": f"String should have at most {most}"})
    if "pattern" in schema and _regex(schema["pattern"]).fullmatch(value) is None:
        found.append({"field": path, "message": f"String should match pattern '{schema['pattern']}'"})
    return found


def _integer_errors(schema: JsonSchema, value: int, path: str) -> list[Detail]:
    if "minimum" in schema and value < schema["minimum"]:
        return [{"field": path, "message": f"Input should be greater than or equal to {schema['minimum']}"}]
    if "maximum" in schema and value > schema["maximum"]:
        return [{"field": path, "message": f"Input should be less than or equal to {schema['maximum']}"}]
    return []


def _array_errors(schema: JsonSchema, value: list[Any], path: str) -> list[Detail]:
    found: list[Detail] = []
    if len(value) < schema.get("minItems", 0):
        found.append({"field": path, "message": f"List should have at least {_plural(schema['minItems'], 'item')}"})
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        found.append({"field": path, "message": f"List should have at most {_plural(schema['maxItems'], 'item')}"})
    if "items" in schema:
        for index, item in enumerate(value):
            found.extend(errors(schema["items"], item, f"{path}.{index}"))
    if schema.get("uniqueItems") and not found:
        seen: list[Any] = []
        for item in value:
            if item in seen:
                found.append({"field": path, "message": "List should not repeat an item"})
                break
            seen.append(item)
    return found


def _object_errors(schema: JsonSchema, value: dict[str, Any], path: str) -> list[Detail]:
    properties: Mapping[str, JsonSchema] = schema.get("properties", {})
    top = path == "body"

    def at(name: str) -> str:
        return name if top else f"{path}.{name}"

    found: list[Detail] = []
    if len(value) < schema.get("minProperties", 0):
        found.append({"field": path, "message": f"at least one of {', '.join(properties)} is required"})
    missing = [name for name in schema.get("required", ()) if name not in value]
    found.extend({"field": at(name), "message": "Field required"} for name in missing)
    for name, item in value.items():
        if name in properties:
            found.extend(errors(properties[name], item, at(name)))
        else:
            found.append({"field": at(name), "message": "Extra inputs are not permitted"})
    return found


def with_defaults(schema: JsonSchema, value: dict[str, Any]) -> dict[str, Any]:
    """A passing object with the declared defaults of the properties it lacks."""
    defaults = {
        name: prop["default"]
        for name, prop in schema.get("properties", {}).items()
        if name not in value and "default" in prop
    }
    return {**defaults, **value}


# ---------------------------------------------------------------- a route's input
@dataclass(frozen=True)
class Parameter:
    """A query or header parameter: its name as sent and its JSON Schema (a
    query value is text; an ``integer`` one is read as a whole number first)."""

    name: str
    schema: JsonSchema = field(default_factory=lambda: {"type": "string"})
    required: bool = False

    def __post_init__(self) -> None:
        check_schema(self.schema, self.name)


@dataclass(frozen=True)
class RouteInput:
    """What one route accepts besides its path: a body (a class with a
    ``SCHEMA``, built from the checked body), query and header parameters.
    A query parameter it does not declare is a 400, like an unknown body field."""

    body: Callable[..., Any] | None = None
    query: Sequence[Parameter] = ()
    headers: Sequence[Parameter] = ()

    def __post_init__(self) -> None:
        if self.body is not None:
            check_schema(self.body_schema, getattr(self.body, "__name__", "body"))

    @property
    def body_schema(self) -> JsonSchema:
        schema: JsonSchema = getattr(self.body, "SCHEMA")  # noqa: B009 - a class attribute by contract
        return schema


@dataclass(frozen=True)
class CheckedInput:
    """A request that passed its route's :class:`RouteInput`: the body's
    object, and every declared parameter (its default, or None, when absent)."""

    body: Any = None
    query: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, Any] = field(default_factory=dict)


def _query_value(parameter: Parameter, text: str) -> Any:
    number = whole_number(text) if "integer" in _types(parameter.schema) else None
    return text if number is None else number


def _parameters(declared: Sequence[Parameter], given: Mapping[str, str], found: list[Detail]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for parameter in declared:
        if parameter.name not in given:
            if parameter.required:
                found.append({"field": parameter.name, "message": "Field required"})
            values[parameter.name] = parameter.schema.get("default")
            continue
        value = _query_value(parameter, given[parameter.name])
        found.extend(errors(parameter.schema, value, parameter.name))
        values[parameter.name] = value
    return values


def _body_text(event: Mapping[str, Any]) -> str | None:
    body = event.get("body")
    if not body:
        return None
    if not event.get("isBase64Encoded"):
        return str(body)
    try:
        return base64.b64decode(body, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidJson() from exc


def json_body(text: str) -> Any:
    """``json.loads``, where every unreadable text (nesting deeper than the
    decoder's recursion limit, an integer longer than Python converts) is
    ``INVALID_JSON``, never a 500."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidJson() from exc


def read_input(declared: RouteInput, event: Mapping[str, Any]) -> CheckedInput:
    """Check a REST (v1 proxy) event's query, headers and body against what its
    route declares; a 400 names every failing field at once."""
    found: list[Detail] = []
    query_given: Mapping[str, str] = event.get("queryStringParameters") or {}
    allowed = {parameter.name for parameter in declared.query}
    named = set(query_given) | set(event.get("multiValueQueryStringParameters") or {})
    found.extend({"field": name, "message": "unknown query parameter"} for name in sorted(named - allowed))
    query = _parameters(declared.query, query_given, found)
    # Header names are case-insensitive: each is read under the name it is declared with.
    sent = {str(name).lower(): value for name, value in (event.get("headers") or {}).items()}
    headers_given = {p.name: sent[p.name.lower()] for p in declared.headers if p.name.lower() in sent}
    headers = _parameters(declared.headers, headers_given, found)
    body: Any = None
    if declared.body is not None:
        text = _body_text(event)
        if text is None:
            found.append({"field": "body", "message": "Field required"})
        else:
            value = json_body(text)
            body_errors = errors(declared.body_schema, value, "body")
            if body_errors:
                found.extend(body_errors)
            else:
                body = declared.body(**with_defaults(declared.body_schema, value))
    if found:
        raise ValidationFailed(details=found)
    return CheckedInput(body=body, query=query, headers=headers)
