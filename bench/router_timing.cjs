// The edge router's own work per request (router/edge_router.js under Node, as
// bench/router.py runs it): the function loaded once in a V8 context holding only
// a stand-in `cf` (an in-memory KeyValueStore of `tenants` placements over `cells`
// cells) and `Buffer`, as the runtime has no network or timers; then `requests`
// viewer-request events, each a token of a random tenant, timed one by one with
// process.hrtime after `warmup` untimed ones. CloudFront runs the function on its
// own JavaScript runtime, not Node: the figures say how much work the function
// does, not what CloudFront's edge adds.
//
// stdin: {"source", "tenants", "cells", "requests", "warmup"}; stdout: {"ns": [...], "routed": n}
'use strict';

const fs = require('fs');
const vm = require('vm');

const IMPORT = "import cf from 'cloudfront';\n";

function base64url(text) {
    return Buffer.from(text, 'utf8').toString('base64url');
}

function token(tenant) {
    const header = base64url(JSON.stringify({ alg: 'RS256', kid: 'k1' }));
    const claims = base64url(JSON.stringify({
        sub: '3f9c2b1e-0000-4000-8000-000000000000', 'custom:tenant_id': tenant, token_use: 'id',
        iss: 'https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example', exp: 2000000000,
    }));
    return `Bearer ${header}.${claims}.${'s'.repeat(342)}`;
}

async function main() {
    const input = JSON.parse(fs.readFileSync(0, 'utf8'));
    const source = fs.readFileSync(input.source, 'utf8');
    if (!source.startsWith(IMPORT)) {
        throw new Error(`${input.source} does not start with ${JSON.stringify(IMPORT)}`);
    }
    const store = new Map();
    for (let cell = 0; cell < input.cells; cell += 1) {
        store.set(`cell/cell-${cell}`, JSON.stringify({ domain: `a${cell}b2c3d4e5.execute-api.us-east-1.amazonaws.com`, path: '/v1' }));
    }
    for (let n = 0; n < input.tenants; n += 1) {
        store.set(`tenant/t${n}`, JSON.stringify({ cell: `cell-${n % input.cells}`, epoch: 1 }));
    }
    let routed = 0;
    const cf = {
        kvs() {
            return {
                async get(key, options) {
                    if (!store.has(key)) {
                        throw new Error(`KeyNotFound: ${key}`);
                    }
                    const value = store.get(key);
                    return options && options.format === 'json' ? JSON.parse(value) : value;
                },
            };
        },
        updateRequestOrigin() {
            routed += 1;
        },
    };
    const context = vm.createContext({ cf: cf, Buffer: Buffer });
    const handler = vm.runInContext(`${source.slice(IMPORT.length)}\n;handler`, context, { filename: 'edge_router.js' });
    const tokens = [];
    for (let n = 0; n < 1000; n += 1) {
        tokens.push(token(`t${Math.floor(Math.random() * input.tenants)}`));
    }
    const event = (n) => ({
        version: '1.0',
        context: { distributionDomainName: 'd111111abcdef8.cloudfront.net', eventType: 'viewer-request' },
        viewer: { ip: '198.51.100.7' },
        request: {
            method: 'GET', uri: '/tickets', querystring: {}, cookies: {},
            headers: { authorization: { value: tokens[n % tokens.length] }, host: { value: 'api.example.com' } },
        },
    });
    for (let n = 0; n < input.warmup; n += 1) {
        await handler(event(n));
    }
    routed = 0;
    const ns = [];
    for (let n = 0; n < input.requests; n += 1) {
        const request = event(n);
        const started = process.hrtime.bigint();
        await handler(request);
        ns.push(Number(process.hrtime.bigint() - started));
    }
    process.stdout.write(JSON.stringify({ ns: ns, routed: routed }));
}

main().catch((e) => {
    process.stderr.write(String(e && e.stack ? e.stack : e));
    process.exit(1);
});
