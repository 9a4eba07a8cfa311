import cf from 'cloudfront';

// The router at the edge (CloudFront Functions, cloudfront-js-2.0, viewer request):
// sends a request to the cell that serves the tenant named by its token's
// custom:tenant_id claim, looked up in the control plane's KeyValueStore.
//
// It verifies nothing: the token is read, not checked, and the store may be
// seconds behind the directory. A cell serves only the tenants placed in it and
// refuses any other (503 TENANT_MOVING, Retry-After), so a wrong route costs a
// retry, never another tenant's data. For the same reason the router never
// answers itself: a request it cannot route (no token, a garbled one, a tenant
// or cell the store does not name) goes on unchanged to the distribution's own
// origin, the default cell, whose API Gateway answers exactly as a cell does
// (404 for an unknown route before 401 for a missing token, 401 for a forged
// token whether or not its tenant exists, 503 for a tenant it does not hold).
//
// The store (written by the operator's commands, ops/cell_routes.py, never by a request):
//   tenant/<tenant id>  {"cell": "<cell id>", "epoch": <n>}
//   cell/<cell id>      {"domain": "<api id>.execute-api.<region>.amazonaws.com", "path": "/<stage>"}
// A cell's origin is named once (a second key), so replacing a cell's API rewrites
// one key, not one per tenant. Two reads a routed request, in sequence (the runtime's
// advice: promise combinators cost memory and gain nothing).
//
// This file is also templates/control-plane.yaml's FunctionCode, character for
// character (tests/unit/test_control_plane_template.py holds them equal).

const routes = cf.kvs();

const TENANT_KEY = 'tenant/';
const CELL_KEY = 'cell/';
// The one header form the cells accept (their authorizer's identityValidationExpression).
const BEARER = /^Bearer [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
// A cell's API Gateway rejects a request whose headers exceed 10,240 bytes: a longer
// header is never a token any cell accepts, and is not decoded here.
const MAX_AUTHORIZATION = 10240;
const TENANT_CLAIM = 'custom:tenant_id';
// Tenant and cell ids: lowercase letters, digits and '-', 1-63 characters, as
// everywhere in the product; nothing else is ever part of a store key.
const ID = /^[a-z0-9-]{1,63}$/;
// Only a regional API Gateway endpoint and a stage path: whatever a store value
// says, a token is never sent to any other kind of host.
const DOMAIN = /^[a-z0-9]{1,63}\.execute-api\.[a-z0-9-]{1,32}\.amazonaws\.com$/;
const STAGE_PATH = /^\/[A-Za-z0-9_]{1,64}$/;

// The tenant id of a request's token, unverified; null when it names none.
function tenantOf(request) {
    const header = request.headers.authorization;
    // Two Authorization headers: which one a cell would read is not the router's
    // to guess; the request goes on untouched (the default cell answers).
    if (!header || (header.multiValue && header.multiValue.length > 1)) {
        return null;
    }
    const value = header.value;
    if (typeof value !== 'string' || value.length > MAX_AUTHORIZATION || !BEARER.test(value)) {
        return null;
    }
    let claims;
    try {
        claims = JSON.parse(Buffer.from(value.split('.')[1], 'base64url').toString('utf8'));
    } catch (e) {
        return null;
    }
    const tenant = claims !== null && typeof claims === 'object' ? claims[TENANT_CLAIM] : undefined;
    return typeof tenant === 'string' && ID.test(tenant) ? tenant : null;
}

// The origin of the cell the store places the tenant in; null when it names none
// (a missing key, an unreadable or malformed value).
async function originOf(tenant) {
    try {
        const placement = await routes.get(TENANT_KEY + tenant, { format: 'json' });
        const cell = placement !== null && typeof placement === 'object' ? placement.cell : undefined;
        if (typeof cell !== 'string' || !ID.test(cell)) {
            return null;
        }
        const origin = await routes.get(CELL_KEY + cell, { format: 'json' });
        if (origin === null || typeof origin !== 'object') {
            return null;
        }
        const domain = origin.domain;
        const path = origin.path;
        if (typeof domain !== 'string' || !DOMAIN.test(domain) || typeof path !== 'string' || !STAGE_PATH.test(path)) {
            return null;
        }
        return { domainName: domain, originPath: path };
    } catch (e) {
        return null;
    }
}

async function handler(event) {
    const request = event.request;
    const tenant = tenantOf(request);
    if (tenant === null) {
        return request;
    }
    const origin = await originOf(tenant);
    if (origin !== null) {
        // Every other origin setting (HTTPS only, TLS 1.2, timeouts) is the default
        // cell's, inherited; the Host header is the new origin's (the distribution
        // forwards every viewer header but Host).
        cf.updateRequestOrigin(origin);
    }
    return request;
}
