// Runs the edge router (router/edge_router.js) under Node as CloudFront Functions
// would, one viewer-request event per case, for tests/unit/test_edge_router.py.
//
// The function's first line imports the runtime's `cloudfront` module; here it is
// taken off and `cf` is a stand-in: an in-memory KeyValueStore (a missing key throws,
// as the runtime's get() does; format "json" parses) that records every key read, and
// origin helpers that record their calls. Each case runs in a fresh V8 context that
// holds only `cf`, `Buffer` and `console`, as the runtime has no network, timers,
// require or process: a function that reached for one would fail here too.
//
// stdin: {"source": <path>, "cases": [{"store": {key: value string}, "headers": {...}}]}
// stdout: one result per case: {"request_unchanged", "returned_request", "origin_updates",
//         "origin_selections", "reads", "kvs_arguments", "error"}
'use strict';

const fs = require('fs');
const vm = require('vm');

const IMPORT = "import cf from 'cloudfront';\n";

function fakeCloudFront(store, record) {
    const handle = {
        async get(key, options) {
            record.reads.push(key);
            if (!Object.prototype.hasOwnProperty.call(store, key)) {
                throw new Error(`KeyNotFound: ${key}`);
            }
            const value = store[key];
            return options && options.format === 'json' ? JSON.parse(value) : value;
        },
        async exists(key) {
            record.reads.push(key);
            return Object.prototype.hasOwnProperty.call(store, key);
        },
    };
    return {
        kvs(...args) {
            record.kvs_arguments.push(args);
            return handle;
        },
        updateRequestOrigin(params) {
            record.origin_updates.push(JSON.parse(JSON.stringify(params)));
        },
        selectRequestOriginById(id) {
            record.origin_selections.push(id);
        },
    };
}

function viewerRequest(headers) {
    return {
        version: '1.0',
        context: { distributionDomainName: 'd111111abcdef8.cloudfront.net', eventType: 'viewer-request' },
        viewer: { ip: '198.51.100.7' },
        request: { method: 'GET', uri: '/tickets', querystring: {}, headers: headers, cookies: {} },
    };
}

async function runCase(body, testCase) {
    const record = { reads: [], kvs_arguments: [], origin_updates: [], origin_selections: [] };
    const context = vm.createContext({ cf: fakeCloudFront(testCase.store, record), Buffer: Buffer, console: console });
    const event = viewerRequest(testCase.headers);
    const before = JSON.stringify(event.request);
    let result = null;
    let error = null;
    try {
        const handler = vm.runInContext(`${body}\n;handler`, context, { filename: 'edge_router.js' });
        result = await handler(event);
    } catch (e) {
        error = String(e && e.stack ? e.stack : e);
    }
    return Object.assign(record, {
        returned_request: result === event.request,
        request_unchanged: JSON.stringify(event.request) === before,
        error: error,
    });
}

async function main() {
    const input = JSON.parse(fs.readFileSync(0, 'utf8'));
    const source = fs.readFileSync(input.source, 'utf8');
    if (!source.startsWith(IMPORT)) {
        throw new Error(`${input.source} does not start with ${JSON.stringify(IMPORT)}`);
    }
    const body = source.slice(IMPORT.length);
    const results = [];
    for (const testCase of input.cases) {
        results.push(await runCase(body, testCase));
    }
    process.stdout.write(JSON.stringify(results));
}

main().catch((e) => {
    process.stderr.write(String(e && e.stack ? e.stack : e));
    process.exit(1);
});
