"""Which URLs a webhook may point at (support_tickets.core.webhook_urls): every
kind of local or private target refused, in every spelling; no network (the
resolver is a stub)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from support_tickets.core.errors import InvalidWebhookUrl
from support_tickets.core.webhook_urls import check_webhook_url

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
