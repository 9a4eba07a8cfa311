"""The webhook routes through the local stack (make dev): registered through
the gateway and the real functions, the secret encrypted through the KMS
endpoint's listener; http://127.0.0.1:<port> receivers accepted because make
dev sets WEBHOOK_ALLOW_LOCAL_HTTP=true, nothing else loopback; tenants "1" and
"10" (a random base and base + "0") never see each other's webhooks."""

from __future__ import annotations

from tests.e2e.conftest import RunningStack, new_tenant_id


def test_make_dev_accepts_a_local_http_receiver_and_keeps_tenants_apart(stack: RunningStack) -> None:
    own = new_tenant_id()
    other = own + "0"
    admin = stack.token(own, f"root-{own}", admin=True)
    other_admin = stack.token(other, f"root-{other}", admin=True)
    body = {"url": "http://127.0.0.1:8765/hook", "events": ["ticket.created"]}
    created = stack.request("POST", "/webhooks", token=admin, body=body)
    assert created.status == 201, created.body
    assert created.body["url"] == body["url"]
    assert created.body["secret"].startswith("whsec_")
    # Loopback without an explicit port, or over https, or another private address: still refused.
    for url in ("http://127.0.0.1/hook", "http://10.0.0.7:8765/hook", "http://localhost:8765/hook"):
        refused = stack.request("POST", "/webhooks", token=admin, body={**body, "url": url})
        assert (refused.status, refused.error_code) == (400, "INVALID_WEBHOOK_URL"), url
    webhook_id = created.body["webhook_id"]
    assert stack.request("GET", "/webhooks", token=other_admin).body == {"items": []}
    gone = stack.request("DELETE", f"/webhooks/{webhook_id}", token=other_admin)
    assert (gone.status, gone.error_code) == (404, "WEBHOOK_NOT_FOUND")
    rotated = stack.request("POST", f"/webhooks/{webhook_id}/secret", token=admin)
    assert rotated.status == 200, rotated.body
    listed = stack.request("GET", "/webhooks", token=admin).body["items"]
    assert [webhook["webhook_id"] for webhook in listed] == [webhook_id]
    assert "secret" not in str(listed)
    assert stack.request("DELETE", f"/webhooks/{webhook_id}", token=admin).status == 204
