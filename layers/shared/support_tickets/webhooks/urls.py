"""Which URLs a webhook may point at (docs/webhooks.md, "URLs").

Judged at registration and again before every delivery attempt (DNS can
change in between). Deployed, only ``https://`` URLs whose host resolves, and
only to globally reachable addresses (:data:`SPECIAL_PURPOSE`: IANA's IPv4 and
IPv6 Special-Purpose Address Registries, each entry with its "Globally
Reachable" answer); the local stack (``make dev``) also admits
``http://127.0.0.1:<port>`` receivers, but never on the stack's own ports (its
emulator, whose ``/_local/...`` control endpoints move the whole stack, its
VPC endpoint listener, its API). The resolver is a parameter, so tests never
touch the network; it runs in a thread of its own and is waited for at most
``timeout`` seconds (``getaddrinfo`` has no timeout of its own): a lookup that
takes longer is :class:`ResolutionTimedOut`.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from support_tickets.core.errors import InvalidWebhookUrl, Unavailable

MAX_URL_LENGTH: Final = 2048
LOCAL_HTTP_HOST: Final = "127.0.0.1"
# Names that never point anywhere public, whatever a resolver says.
_LOCAL_NAMES: Final = ("localhost", ".localhost", ".local", ".internal", ".localdomain", ".home.arpa")
# A DNS name: labels of letters, digits and "-" (IDNs in their xn-- form).
_LABEL: Final = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
# Every form inet_aton accepts: 1 to 4 parts, each decimal, octal (0…) or hex (0x…).
_INET_ATON_PART: Final = re.compile(r"0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*")
# How long a registration waits for its URL's host to resolve (503 UNAVAILABLE after:
# nothing is known of the URL yet, so it is not refused). A delivery attempt waits
# what is left of its own deadline instead.
REGISTRATION_RESOLVE_SECONDS: Final = 3.0

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Iterable[str]]


@dataclass(frozen=True)
class SpecialRange:
    """An entry of IANA's IPv4 or IPv6 Special-Purpose Address Registry."""

    network: Network
    name: str
    # The registry's "Globally Reachable" column; None where it says N/A or nothing
    # (a terminated entry, 6to4, Teredo): refused, like False.
    globally_reachable: bool | None


def _special(cidr: str, name: str, globally_reachable: bool | None) -> SpecialRange:
    return SpecialRange(ipaddress.ip_network(cidr), name, globally_reachable)


# Every entry of IANA's special-purpose registries, IPv4 (updated 2025) and IPv6 (RFC 9780's
# 100:0:0:1::/64 of 2025 included): https://www.iana.org/assignments/iana-ipv4-special-registry/
# and https://www.iana.org/assignments/iana-ipv6-special-registry/. An address is judged by the
# most specific entry that holds it (2001::/23 is False but 2001:3::/32 in it is True). Python's
# ipaddress.is_global lags them (3.13 calls fec0::/10, 3fff::/20, 100:0:0:1::/64 and
# 192.88.99.0/24 global and 2001:1::3 not): the registries decide here. docs/webhooks.md lists
# the same table, and tests/unit/test_webhook_urls.py checks both against its own copy.
SPECIAL_PURPOSE: Final = (
    _special("0.0.0.0/8", '"This network"', False),
    _special("0.0.0.0/32", '"This host on this network"', False),
    _special("10.0.0.0/8", "Private-Use", False),
    _special("100.64.0.0/10", "Shared Address Space", False),
    _special("127.0.0.0/8", "Loopback", False),
    _special("169.254.0.0/16", "Link Local", False),
    _special("172.16.0.0/12", "Private-Use", False),
    _special("192.0.0.0/24", "IETF Protocol Assignments", False),
    _special("192.0.0.0/29", "IPv4 Service Continuity Prefix", False),
    _special("192.0.0.8/32", "IPv4 dummy address", False),
    _special("192.0.0.9/32", "Port Control Protocol Anycast", True),
    _special("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", True),
    _special("192.0.0.170/32", "NAT64/DNS64 Discovery", False),
    _special("192.0.0.171/32", "NAT64/DNS64 Discovery", False),
    _special("192.0.2.0/24", "Documentation (TEST-NET-1)", False),
    _special("192.31.196.0/24", "AS112-v4", True),
    _special("192.52.193.0/24", "AMT", True),
    _special("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", None),
    _special("192.88.99.2/32", "6a44-relay anycast address", False),
    _special("192.168.0.0/16", "Private-Use", False),
    _special("192.175.48.0/24", "Direct Delegation AS112 Service", True),
    _special("198.18.0.0/15", "Benchmarking", False),
    _special("198.51.100.0/24", "Documentation (TEST-NET-2)", False),
    _special("203.0.113.0/24", "Documentation (TEST-NET-3)", False),
    _special("240.0.0.0/4", "Reserved", False),
    _special("255.255.255.255/32", "Limited Broadcast", False),
    _special("::1/128", "Loopback Address", False),
    _special("::/128", "Unspecified Address", False),
    _special("::ffff:0:0/96", "IPv4-mapped Address", False),
    _special("64:ff9b::/96", "IPv4-IPv6 Translat.", True),
    _special("64:ff9b:1::/48", "IPv4-IPv6 Translat.", False),
    _special("100::/64", "Discard-Only Address Block", False),
    _special("100:0:0:1::/64", "Dummy IPv6 Prefix", False),
    _special("2001::/23", "IETF Protocol Assignments", False),
    _special("2001::/32", "TEREDO", None),
    _special("2001:1::1/128", "Port Control Protocol Anycast", True),
    _special("2001:1::2/128", "Traversal Using Relays around NAT Anycast", True),
    _special("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", True),
    _special("2001:2::/48", "Benchmarking", False),
    _special("2001:3::/32", "AMT", True),
    _special("2001:4:112::/48", "AS112-v6", True),
    _special("2001:10::/28", "Deprecated (previously ORCHID)", None),
    _special("2001:20::/28", "ORCHIDv2", True),
    _special("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", True),
    _special("2001:db8::/32", "Documentation", False),
    _special("2002::/16", "6to4", None),
    _special("2620:4f:8000::/48", "Direct Delegation AS112 Service", True),
    _special("3fff::/20", "Documentation", False),
    _special("5f00::/16", "Segment Routing (SRv6) SIDs", False),
    _special("fc00::/7", "Unique-Local", False),
    _special("fe80::/10", "Link-Local Unicast", False),
)
# The well-known NAT64 prefix (globally reachable): it reaches the IPv4 address it carries,
# which is judged instead.
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
# IANA's IPv6 Global Unicast space (IPv6 Address Space registry): everything outside it that no
# special-purpose entry names is not a destination (fec0::/10, the deprecated site-local
# range, RFC 3879; ff00::/8 multicast; ::/96, the deprecated IPv4-compatible form; the rest
# "Reserved by IETF").
_GLOBAL_UNICAST_V6: Final = ipaddress.ip_network("2000::/3")


class ResolutionTimedOut(Unavailable):
    """The host did not resolve within the time allowed: 503 ``UNAVAILABLE`` at
    registration (retry later; the URL is not judged), a failed attempt at delivery."""

    default_message = "The webhook URL's host did not resolve in time; retry later."


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (``getaddrinfo``, TCP). Unbounded in time:
    :func:`check_webhook_url` calls it through :func:`resolve_within`."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise InvalidWebhookUrl("The URL's host does not resolve.") from exc
    return [str(info[4][0]) for info in found]


def resolve_within(resolve: Resolver, host: str, port: int, timeout: float) -> list[str]:
    """``resolve(host, port)``, waited for at most ``timeout`` seconds, else
    :class:`ResolutionTimedOut`. The lookup runs in a daemon thread that is left to
    finish on its own (``getaddrinfo`` cannot be interrupted; the system resolver's
    own retries end it), so neither a registration nor a delivery attempt outlives
    its bound, and a stuck lookup never holds up the process's exit."""
    outcome: list[list[str] | BaseException] = []
    done = threading.Event()

    def lookup() -> None:
        try:
            outcome.append(list(resolve(host, port)))
        except BaseException as exc:  # handed to the waiting caller, raised there
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=lookup, name="webhook-url-resolve", daemon=True).start()
    if not done.wait(max(0.0, timeout)):
        raise ResolutionTimedOut()
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    return result


@dataclass(frozen=True)
class CheckedUrl:
    """A URL that passed: as given, its host and port, and the addresses it resolved to."""

    url: str
    host: str
    port: int
    addresses: tuple[str, ...]


def _refuse(reason: str) -> InvalidWebhookUrl:
    return InvalidWebhookUrl(details=[{"field": "url", "message": reason}])


def _inet_aton_part(text: str) -> int:
    if text.startswith("0x"):
        return int(text[2:] or "0", 16)
    return int(text, 8) if text.startswith("0") else int(text)


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a resolver would make of a numeric host in any of
    inet_aton's forms (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``)."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_INET_ATON_PART.fullmatch(part) for part in parts):
        return None
    *leading, last = [_inet_aton_part(part) for part in parts]
    last_bytes = 5 - len(parts)  # the last part fills the bytes the others leave
    if any(value > 255 for value in leading) or last >= 256**last_bytes:
        return None
    number = 0
    for value in leading:
        number = number * 256 + value
    return ipaddress.IPv4Address(number * 256**last_bytes + last)


def special_range(address: Address) -> SpecialRange | None:
    """The most specific entry of :data:`SPECIAL_PURPOSE` that holds ``address``, if any."""
    holding = [entry for entry in SPECIAL_PURPOSE if entry.network.version == address.version]
    holding = [entry for entry in holding if address in entry.network]
    return max(holding, key=lambda entry: entry.network.prefixlen, default=None)


def is_public(address: Address) -> bool:
    """Whether a webhook may be delivered to ``address``: globally reachable as IANA's
    special-purpose registries say (N/A and terminated entries refused), multicast never,
    IPv6 only in the global unicast space; a well-known NAT64 address is judged by the
    IPv4 address it carries (IPv4-mapped, 6to4, Teredo and IPv4-compatible forms are
    refused whatever they carry). Outside the registries, Python's ``is_global`` as well."""
    if isinstance(address, ipaddress.IPv6Address) and address in _NAT64:
        return is_public(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    entry = special_range(address)
    if entry is not None:
        return entry.globally_reachable is True
    if address.is_multicast or address.is_reserved:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_UNICAST_V6:
        return False
    return address.is_global


def _literal(host: str, bracketed: bool) -> Address | None:
    """The address a numeric host stands for (IPv6 in brackets, IPv4 in any inet_aton form)."""
    if bracketed:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError as exc:
            raise _refuse("is not a valid IPv6 address") from exc
    return _inet_aton(host)


def check_webhook_url(
    url: object,
    *,
    resolve: Resolver = system_resolver,
    allow_local_http: bool = False,
    local_stack_ports: Collection[int] = (),
    timeout: float = REGISTRATION_RESOLVE_SECONDS,
) -> CheckedUrl:
    """``url`` if a webhook may point at it, else :class:`InvalidWebhookUrl`
    (400 ``INVALID_WEBHOOK_URL``) with the reason in its details;
    :class:`ResolutionTimedOut` (503 ``UNAVAILABLE``) when its host did not resolve
    within ``timeout`` seconds. With ``allow_local_http`` (the local stack),
    ``local_stack_ports`` are the stack's own listeners, never a receiver."""
    if not isinstance(url, str) or not url:
        raise _refuse("must be a URL")
    if len(url) > MAX_URL_LENGTH:
        raise _refuse(f"must be at most {MAX_URL_LENGTH} characters")
    if any(not 0x21 <= ord(char) <= 0x7E for char in url) or "\\" in url:
        raise _refuse("must be printable ASCII without spaces or backslashes (IDNs in their xn-- form)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _refuse("is not a valid URL (host or port)") from exc
    if "@" in parts.netloc:
        raise _refuse("must not contain a user name or password")
    if "#" in url:
        raise _refuse("must not have a fragment")
    host = (parts.hostname or "").lower()
    bracketed = parts.netloc.startswith("[")
    if not host:
        raise _refuse("must have a host")
    if port == 0:
        raise _refuse("the port must be 1-65535")
    scheme = parts.scheme.lower()
    if scheme == "http" and allow_local_http:
        if bracketed or host != LOCAL_HTTP_HOST or port is None:
            raise _refuse(f"http:// is accepted only as http://{LOCAL_HTTP_HOST}:<port> (local stack)")
        if port in local_stack_ports:
            raise _refuse("must not point at the local stack's own ports (its emulator, endpoints or API)")
        return CheckedUrl(url, host, port, (LOCAL_HTTP_HOST,))
    if scheme != "https":
        raise _refuse("must be https://")
    return CheckedUrl(url, host, port or 443, _public_addresses(host, bracketed, port or 443, resolve, timeout))


def _public_addresses(host: str, bracketed: bool, port: int, resolve: Resolver, timeout: float) -> tuple[str, ...]:
    """Every address ``host`` stands for, each public; else :class:`InvalidWebhookUrl`."""
    literal = _literal(host, bracketed)
    if literal is not None:
        if not is_public(literal):
            raise _refuse("must point at a globally reachable address (not loopback, private, link-local or reserved)")
        return (str(literal),)
    if ":" in host or host.endswith("."):
        raise _refuse("is not a valid host")
    if host == _LOCAL_NAMES[0] or host.endswith(_LOCAL_NAMES[1:]):
        raise _refuse("must not point at a local name")
    labels = host.split(".")
    if len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        raise _refuse("must have a public DNS name or address as its host")
    addresses = tuple(resolve_within(resolve, host, port, timeout))
    if not addresses:
        raise _refuse("the host does not resolve")
    for text in addresses:
        try:
            address = ipaddress.ip_address(text)
        except ValueError as exc:
            raise _refuse("the host resolves to something that is not an address") from exc
        if not is_public(address):
            raise _refuse("the host resolves to an address that is not globally reachable")
    return addresses
