// The router of `make dev CELLS=<n>` (local_stack/cells.py starts it): what the
// control plane's CloudFront distribution does, on one local port.
//
// For every request it builds CloudFront's viewer-request event, runs
// router/edge_router.js unchanged (its `import cf` line taken off, in a fresh V8
// context holding only a stand-in `cf`, `Buffer` and `console`, as
// tests/unit/edge_router_harness.cjs runs it), then proxies the request (method,
// path, query, headers but Host, body) to the origin the function chose, or to
// the default cell's when it chose none, and hands back the answer (status,
// headers, body). The function changes nothing but the origin
// (tests/unit/test_edge_router.py), so the request goes on as it came.
//
// The stand-in's KeyValueStore reads the store's JSON file ({key: value}),
// again whenever the file changes (ops/local_routes.py replaces it at every
// write). An origin is the function's {domainName, originPath}; the supervisor
// maps each cell's fake API domain and stage path to the cell's local URL
// (locally a cell's API has no stage prefix). An origin not in the map is one
// CloudFront would fail to reach: 502.
//
// stdin, first line: {"source", "store", "origins": {"<domain><path>": "<url>"}, "default": "<url>",
// "fd": <the socket the supervisor bound and handed down: it named the port before anything listens>}.
// A second line "listen" makes it listen; it prints "listening" once it does. It
// exits when stdin closes (the supervisor gone).
'use strict';

const fs = require('fs');
const http = require('http');
const readline = require('readline');
const vm = require('vm');

const IMPORT = "import cf from 'cloudfront';\n";
// CloudFront's origin response timeout, at most (API Gateway's own is 29 s).
const ORIGIN_TIMEOUT_MS = 60000;
// Hop-by-hop headers: one connection's, never forwarded (RFC 9110, 7.6.1).
const HOP_BY_HOP = new Set([
    'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection',
    'te', 'trailer', 'transfer-encoding', 'upgrade',
]);

function storeReader(path) {
    let stamp = null;
    let items = {};
    return function current() {
        let stat = null;
        try {
            stat = fs.statSync(path, { bigint: true });
        } catch (e) {
            stamp = null;
            items = {};
            return items;
        }
        const seen = `${stat.ino}:${stat.mtimeNs}:${stat.size}`;
        if (seen !== stamp) {
            const text = fs.readFileSync(path, 'utf8');
            items = text.trim() ? JSON.parse(text) : {};
            stamp = seen;
        }
        return items;
    };
}

function fakeCloudFront(store, chosen) {
    const handle = {
        async get(key, options) {
            const items = store();
            if (!Object.prototype.hasOwnProperty.call(items, key)) {
                throw new Error(`KeyNotFound: ${key}`);
            }
            const value = items[key];
            return options && options.format === 'json' ? JSON.parse(value) : value;
        },
        async exists(key) {
            return Object.prototype.hasOwnProperty.call(store(), key);
        },
    };
    return {
        kvs() {
            return handle;
        },
        updateRequestOrigin(params) {
            chosen.push({ domainName: params.domainName, originPath: params.originPath || '' });
        },
        selectRequestOriginById() {
            throw new Error('the local router has one origin per cell, no origin ids');
        },
    };
}

// CloudFront's {name: {value, multiValue?}} of a set of values, one entry per name.
function multiValued(lists) {
    const result = {};
    for (const [name, values] of Object.entries(lists)) {
        const entry = { value: values[0] };
        if (values.length > 1) {
            entry.multiValue = values.map((value) => ({ value: value }));
        }
        result[name] = entry;
    }
    return result;
}

function viewerRequest(req) {
    const url = new URL(req.url, 'http://router.invalid');
    const query = {};
    for (const [name, value] of url.searchParams) {
        (query[name] = query[name] || []).push(value);
    }
    const headers = {};
    const cookies = {};
    for (const [name, values] of Object.entries(req.headersDistinct)) {
        if (name === 'cookie') {
            for (const pair of values.join('; ').split(/;\s*/)) {
                const at = pair.indexOf('=');
                if (at > 0) {
                    (cookies[pair.slice(0, at)] = cookies[pair.slice(0, at)] || []).push(pair.slice(at + 1));
                }
            }
        } else {
            headers[name] = values;
        }
    }
    return {
        version: '1.0',
        context: { distributionDomainName: 'local-router.invalid', eventType: 'viewer-request' },
        viewer: { ip: req.socket.remoteAddress },
        request: {
            method: req.method,
            uri: url.pathname,
            querystring: multiValued(query),
            headers: multiValued(headers),
            cookies: multiValued(cookies),
        },
    };
}

// The viewer's headers but Host (the origin's, as CloudFront's AllViewerExceptHostHeader
// policy forwards them), and X-Forwarded-For as CloudFront adds it.
function forwardedHeaders(req, target) {
    const headers = ['Host', target.host];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i];
        const lower = name.toLowerCase();
        if (lower !== 'host' && !HOP_BY_HOP.has(lower)) {
            headers.push(name, req.rawHeaders[i + 1]);
        }
    }
    headers.push('X-Forwarded-For', req.socket.remoteAddress);
    return headers;
}

function answerHeaders(rawHeaders) {
    const headers = [];
    for (let i = 0; i < rawHeaders.length; i += 2) {
        if (!HOP_BY_HOP.has(rawHeaders[i].toLowerCase())) {
            headers.push(rawHeaders[i], rawHeaders[i + 1]);
        }
    }
    return headers;
}

function fail(res, status, message) {
    if (res.headersSent) {
        res.destroy();
        return;
    }
    const body = JSON.stringify({ message: message });
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
}

function router(config) {
    const source = fs.readFileSync(config.source, 'utf8');
    if (!source.startsWith(IMPORT)) {
        throw new Error(`${config.source} does not start with ${JSON.stringify(IMPORT)}`);
    }
    const script = new vm.Script(`${source.slice(IMPORT.length)}\n;handler`, { filename: 'edge_router.js' });
    const store = storeReader(config.store);
    const agent = new http.Agent({ keepAlive: true });

    async function origin(req) {
        const chosen = [];
        const context = vm.createContext({ cf: fakeCloudFront(store, chosen), Buffer: Buffer, console: console });
        await script.runInContext(context)(viewerRequest(req));
        if (chosen.length === 0) {
            return config.default;
        }
        const last = chosen[chosen.length - 1];
        const found = config.origins[`${last.domainName}${last.originPath}`];
        return found === undefined ? null : found;
    }

    const server = http.createServer((req, res) => {
        req.pause();
        origin(req).then(
            (base) => {
                if (base === null) {
                    fail(res, 502, 'The origin the router chose is not one of the local cells.');
                    req.resume();
                    return;
                }
                const target = new URL(req.url, base);
                const upstream = http.request(
                    target,
                    { method: req.method, headers: forwardedHeaders(req, target), agent: agent, timeout: ORIGIN_TIMEOUT_MS },
                    (answer) => {
                        res.writeHead(answer.statusCode, answer.statusMessage, answerHeaders(answer.rawHeaders));
                        answer.pipe(res);
                    }
                );
                upstream.on('timeout', () => upstream.destroy(new Error('origin timeout')));
                upstream.on('error', (e) => fail(res, 502, `The cell did not answer: ${e.message}`));
                req.pipe(upstream);
                req.resume();
            },
            // CloudFront answers a function that failed with 503 (FunctionExecutionError).
            (e) => {
                process.stderr.write(`edge router failed: ${e && e.stack ? e.stack : e}\n`);
                fail(res, 503, 'The router function failed.');
                req.resume();
            }
        );
    });
    return server;
}

const lines = readline.createInterface({ input: process.stdin });
let config = null;
let server = null;
lines.on('line', (line) => {
    if (server === null) {
        config = JSON.parse(line);
        server = router(config);
    } else if (line === 'listen') {
        server.listen({ fd: config.fd }, () => process.stdout.write('listening\n'));
    }
});
lines.on('close', () => process.exit(0));
