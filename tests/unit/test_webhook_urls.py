"""Which URLs a webhook may point at (support_tickets.webhooks.urls): every
kind of local or private target refused, in every spelling; no network (the
resolver is a stub)."""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Callable

import pytest

from stack_model.template import PROJECT_ROOT
from support_tickets.core.errors import InvalidWebhookUrl
from support_tickets.webhooks.urls import SPECIAL_PURPOSE, ResolutionTimedOut, check_webhook_url, special_range

PUBLIC = "93.184.215.14"


def resolver(*addresses: str) -> Callable[[str, int], list[str]]:
    def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


def no_lookup(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} must be refused before any lookup")


def test_a_public_https_url_passes_with_what_it_resolved_to() -> None:
    checked = check_webhook_url("https://hooks.example.com/in?x=1", resolve=resolver(PUBLIC, "2606:4700::6810:85e5"))
    assert (checked.host, checked.port) == ("hooks.example.com", 443)
    assert checked.addresses == (PUBLIC, "2606:4700::6810:85e5")
    assert check_webhook_url("https://hooks.example.com:8443/", resolve=resolver(PUBLIC)).port == 8443


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/",  # not https
        "ftp://hooks.example.com/",
        "javascript:alert(1)",
        "https:///path",  # no host
        "https://user:pw@hooks.example.com/",  # userinfo
        "https://hooks.example.com@127.0.0.1/",  # the classic userinfo trick
        "https://127.0.0.1\\@hooks.example.com/",  # backslash confusion
        "https://hooks.example.com/#frag",
        "https://hooks.example.com:0/",
        "https://hooks.example.com:99999/",
        "https://hooks.example.com/ space",
        "https://hööks.example.com/",  # IDNs only as xn--
        "https://" + "a" * 2048 + ".com/",
        "",
    ],
)
def test_malformed_or_non_https_urls_are_refused(url: str) -> None:
    with pytest.raises(InvalidWebhookUrl):
        check_webhook_url(url, resolve=no_lookup)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.1",  # short form
        "2130706433",  # decimal
        "0x7f000001",  # hex
        "0x7f.0.0.1",
        "0177.0.0.1",  # octal
        "017700000001",
        "0",
        "0.0.0.0",  # noqa: S104 - a target to refuse, not a bind
        "10.0.0.1",
        "012.0.0.1",  # octal 10.0.0.1
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",  # instance metadata
        "2852039166",  # 169.254.169.254 in decimal
        "100.64.0.1",  # shared address space
        "198.18.0.1",  # benchmarking
        "192.0.2.1",  # documentation
        "224.0.0.1",  # multicast
        "240.0.0.1",  # reserved
        "255.255.255.255",
        "[::1]",
        "[::]",
        "[fe80::1]",  # link-local
        "[fc00::1]",  # unique-local
        "[fd12:3456::1]",
        "[::ffff:127.0.0.1]",  # IPv4-mapped
        "[::ffff:169.254.169.254]",
        "[::ffff:7f00:1]",
        "[::127.0.0.1]",  # IPv4-compatible
        "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
        "[2002:7f00:1::]",  # 6to4 of 127.0.0.1
        "[2001:db8::1]",  # documentation
        "[ff02::1]",  # multicast
        "localhost",
        "LOCALHOST",
        "api.localhost",
        "printer.local",
        "metadata.google.internal",
        "intranet",  # a single label
    ],
)
def test_local_private_and_reserved_targets_are_refused_in_every_spelling(host: str) -> None:
    with pytest.raises(InvalidWebhookUrl):
        check_webhook_url(f"https://{host}/hook", resolve=no_lookup)


@pytest.mark.parametrize(
    "resolved",
    [
        ("127.0.0.1",),
        ("10.1.2.3",),
        ("169.254.169.254",),
        ("::1",),
        ("fd00::1",),
        ("::ffff:10.0.0.1",),
        (PUBLIC, "10.0.0.1"),
    ],
)
def test_a_name_that_resolves_to_any_private_address_is_refused(resolved: tuple[str, ...]) -> None:
    # DNS rebinding at registration: one private answer among public ones is enough.
    with pytest.raises(InvalidWebhookUrl):
        check_webhook_url("https://hooks.example.com/", resolve=resolver(*resolved))


def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(InvalidWebhookUrl):
        check_webhook_url("https://hooks.example.com/", resolve=resolver())


def test_public_ip_literals_pass_without_a_lookup() -> None:
    assert check_webhook_url(f"https://{PUBLIC}/", resolve=no_lookup).addresses == (PUBLIC,)
    assert check_webhook_url("https://[2606:4700::6810:85e5]/", resolve=no_lookup).addresses == (
        "2606:4700::6810:85e5",
    )


def test_local_http_is_only_loopback_with_a_port_and_only_when_allowed() -> None:
    # Deployed: refused.
    with pytest.raises(InvalidWebhookUrl):
        check_webhook_url("http://127.0.0.1:8080/hook", resolve=no_lookup)
    # The local stack: exactly http://127.0.0.1:<port>.
    checked = check_webhook_url("http://127.0.0.1:8080/hook", resolve=no_lookup, allow_local_http=True)
    assert (checked.host, checked.port) == ("127.0.0.1", 8080)
    for url in (
        "http://127.0.0.1/hook",  # no port
        "http://localhost:8080/",
        "http://127.1:8080/",
        "http://2130706433:8080/",
        "http://[::1]:8080/",
        "http://10.0.0.1:8080/",
        "http://hooks.example.com:8080/",
        "http://evil@127.0.0.1:8080/",
    ):
        with pytest.raises(InvalidWebhookUrl):
            check_webhook_url(url, resolve=no_lookup, allow_local_http=True)
    # https stays judged as deployed, even locally.
    with pytest.raises(InvalidWebhookUrl):
        check_webhook_url("https://127.0.0.1:8443/", resolve=no_lookup, allow_local_http=True)


def test_the_refusal_is_a_400_with_the_documented_code() -> None:
    with pytest.raises(InvalidWebhookUrl) as caught:
        check_webhook_url("https://169.254.169.254/latest/meta-data/", resolve=no_lookup)
    assert caught.value.status == 400
    assert caught.value.body()["error"]["code"] == "INVALID_WEBHOOK_URL"
    assert caught.value.body()["error"]["details"][0]["field"] == "url"


# ---------------------------------------------------------------- IANA's special-purpose registries
# One address of every entry of IANA's IPv4 and IPv6 Special-Purpose Address Registries, and
# whether a webhook may point at it: the entry's "Globally Reachable" column (True: allowed;
# False, N/A or a terminated entry: refused). Then what no entry names: multicast, and
# IPv6 outside 2000::/3 (fec0::/10, the deprecated site-local range, first).
# docs/webhooks.md ("Which addresses") shows the same table.
REGISTRY_ENTRIES: list[tuple[str, str, bool]] = [
    ("0.0.0.0/8", "0.1.2.3", False),
    ("0.0.0.0/32", "0.0.0.0", False),  # noqa: S104 - a target to refuse, not a bind
    ("10.0.0.0/8", "10.1.2.3", False),
    ("100.64.0.0/10", "100.64.1.2", False),
    ("127.0.0.0/8", "127.0.0.1", False),
    ("169.254.0.0/16", "169.254.169.254", False),
    ("172.16.0.0/12", "172.31.1.2", False),
    ("192.0.0.0/24", "192.0.0.100", False),
    ("192.0.0.0/29", "192.0.0.1", False),
    ("192.0.0.8/32", "192.0.0.8", False),
    ("192.0.0.9/32", "192.0.0.9", True),
    ("192.0.0.10/32", "192.0.0.10", True),
    ("192.0.0.170/32", "192.0.0.170", False),
    ("192.0.0.171/32", "192.0.0.171", False),
    ("192.0.2.0/24", "192.0.2.1", False),
    ("192.31.196.0/24", "192.31.196.1", True),
    ("192.52.193.0/24", "192.52.193.1", True),
    ("192.88.99.0/24", "192.88.99.1", False),  # terminated (6to4 relay anycast)
    ("192.88.99.2/32", "192.88.99.2", False),
    ("192.168.0.0/16", "192.168.1.1", False),
    ("192.175.48.0/24", "192.175.48.1", True),
    ("198.18.0.0/15", "198.19.0.1", False),
    ("198.51.100.0/24", "198.51.100.1", False),
    ("203.0.113.0/24", "203.0.113.1", False),
    ("240.0.0.0/4", "240.0.0.1", False),
    ("255.255.255.255/32", "255.255.255.255", False),
    ("::1/128", "::1", False),
    ("::/128", "::", False),
    ("::ffff:0:0/96", "::ffff:93.184.215.14", False),  # even of a public IPv4 address
    ("64:ff9b::/96", "64:ff9b::5db8:d70e", True),  # NAT64 of 93.184.215.14: judged by it
    ("64:ff9b:1::/48", "64:ff9b:1::5db8:d70e", False),
    ("100::/64", "100::1", False),
    ("100:0:0:1::/64", "100:0:0:1::1", False),
    ("2001::/23", "2001:100::1", False),
    ("2001::/32", "2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo: N/A
    ("2001:1::1/128", "2001:1::1", True),
    ("2001:1::2/128", "2001:1::2", True),
    ("2001:1::3/128", "2001:1::3", True),
    ("2001:2::/48", "2001:2::1", False),
    ("2001:3::/32", "2001:3::1", True),
    ("2001:4:112::/48", "2001:4:112::1", True),
    ("2001:10::/28", "2001:10::1", False),  # terminated (ORCHID)
    ("2001:20::/28", "2001:20::1", True),
    ("2001:30::/28", "2001:30::1", True),
    ("2001:db8::/32", "2001:db8::1", False),
    ("2002::/16", "2002:5db8:d70e::1", False),  # 6to4, even of a public IPv4 address: N/A
    ("2620:4f:8000::/48", "2620:4f:8000::1", True),
    ("3fff::/20", "3fff::1", False),
    ("5f00::/16", "5f00::1", False),
    ("fc00::/7", "fd12:3456::1", False),
    ("fe80::/10", "fe80::1", False),
]
NOT_IN_THE_REGISTRIES: list[tuple[str, str, bool]] = [
    ("fec0::/10", "fec0::1", False),  # site-local, deprecated (RFC 3879)
    ("224.0.0.0/4", "224.0.0.1", False),  # IPv4 multicast
    ("ff00::/8", "ff02::1", False),  # IPv6 multicast
    ("::/96", "::5db8:d70e", False),  # IPv4-compatible, deprecated, even of a public address
    ("2000::/3", "2606:4700::6810:85e5", True),  # IPv6 global unicast
    ("0.0.0.0/0", PUBLIC, True),  # any other IPv4 unicast address
]


def url_of(address: str) -> str:
    return f"https://[{address}]/" if ":" in address else f"https://{address}/"


@pytest.mark.parametrize(("entry", "address", "allowed"), REGISTRY_ENTRIES + NOT_IN_THE_REGISTRIES)
def test_every_registry_entry_is_allowed_only_if_globally_reachable(entry: str, address: str, allowed: bool) -> None:
    # As a literal in the URL and as what a name resolves to: the same answer.
    for url, resolve in ((url_of(address), no_lookup), ("https://hooks.example.com/", resolver(address))):
        if allowed:
            assert check_webhook_url(url, resolve=resolve).addresses[0] == address
        else:
            with pytest.raises(InvalidWebhookUrl):
                check_webhook_url(url, resolve=resolve)


def test_the_table_has_every_entry_of_the_codes_registry_and_each_address_is_in_its_own_entry() -> None:
    assert {(str(entry.network), entry.globally_reachable is True) for entry in SPECIAL_PURPOSE} == {
        (str(ipaddress.ip_network(entry)), allowed) for entry, _, allowed in REGISTRY_ENTRIES
    }
    for entry, address, _ in REGISTRY_ENTRIES:
        found = special_range(ipaddress.ip_address(address))
        assert found is not None, address
        assert found.network == ipaddress.ip_network(entry), address


def test_the_docs_list_the_same_ranges_and_answers() -> None:
    page = (PROJECT_ROOT / "docs" / "webhooks.md").read_text(encoding="utf-8")
    rows = re.findall(r"^ *\| `([0-9a-f.:/]+)` \|.*\| (allowed|refused)[^|]* \|$", page, flags=re.MULTILINE)
    assert sorted(rows) == sorted(
        (entry, "allowed" if allowed else "refused") for entry, _, allowed in REGISTRY_ENTRIES + NOT_IN_THE_REGISTRIES
    )


# ---------------------------------------------------------------- the local stack's own ports
def test_the_local_stacks_own_ports_are_never_a_receiver() -> None:
    # make dev: the emulator (whose /_local/ control endpoints move the whole stack), its
    # endpoint listener and the API are the stack's; any other loopback port may be a receiver.
    stack = frozenset({4566, 4567, 3000})
    for port in sorted(stack):
        with pytest.raises(InvalidWebhookUrl):
            check_webhook_url(
                f"http://127.0.0.1:{port}/_local/queues/clock?advance=93600",
                resolve=no_lookup,
                allow_local_http=True,
                local_stack_ports=stack,
            )
    checked = check_webhook_url(
        "http://127.0.0.1:8080/hook", resolve=no_lookup, allow_local_http=True, local_stack_ports=stack
    )
    assert checked.port == 8080


# ---------------------------------------------------------------- a lookup that hangs
def test_a_lookup_that_hangs_is_given_up_at_the_bound_as_503_unavailable() -> None:
    release = threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(30)  # getaddrinfo stuck on a nameserver that never answers
        return [PUBLIC]

    try:
        with pytest.raises(ResolutionTimedOut) as caught:
            check_webhook_url("https://hooks.example.com/", resolve=hanging, timeout=0.05)
    finally:
        release.set()
    assert caught.value.status == 503
    assert caught.value.body()["error"]["code"] == "UNAVAILABLE"
    assert "Retry-After" in caught.value.headers()


def test_a_lookups_own_refusal_still_reaches_the_caller() -> None:
    def nxdomain(host: str, port: int) -> list[str]:
        raise InvalidWebhookUrl("The URL's host does not resolve.")

    with pytest.raises(InvalidWebhookUrl):
        check_webhook_url("https://hooks.example.com/", resolve=nxdomain, timeout=5)
