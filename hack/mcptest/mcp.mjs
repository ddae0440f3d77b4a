// The faucet's MCP endpoint through the official TypeScript client
// (@modelcontextprotocol/sdk): its four tools, drips confirmed on the
// devnet, limit refusals as tool errors, one limit shared with the HTTP API,
// eligibility that agrees with the next request, and /mcp off.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import { c32address } from 'c32check';

import { ServerProcess, freePort, killOnExit } from '../jsharness/harness.mjs';

const SERVER_NAME = 'stacks-testnet-faucet';
const TXID = /^0x[0-9a-f]{64}$/;

// Each tool's input properties (name: JSON type) and required ones.
const TOOLS = {
  get_faucet_info: { properties: {}, required: [] },
  check_eligibility: { properties: { asset: 'string', address: 'string' }, required: ['address', 'asset'] },
  request_drip: {
    properties: { asset: 'string', address: 'string', stacking: 'boolean', size: 'string' },
    required: ['address', 'asset'],
  },
  get_drip_status: { properties: { txid: 'string' }, required: ['txid'] },
};
const SIZES = ['default', 'large', 'xlarge'];

/** faucetArgs are the main faucet's flags (btcd off: no BTC is dripped here). */
const faucetArgs = ['--block-time', '2s', '--devnet-btc=false', '--limit-address', '1/1h', '--sbtc-limit-address', '1/1h'];

/** testnetAddress is a fresh random standard testnet address (ST…, version 26). */
function testnetAddress() {
  return c32address(26, randomBytes(20).toString('hex'));
}

/** mainnetAddress is a random standard mainnet address (SP…, version 22). */
function mainnetAddress() {
  return c32address(22, randomBytes(20).toString('hex'));
}

/** isFalseSchema: additionalProperties false, as JSON Schema writes it (false or {"not": {}}). */
function isFalseSchema(s) {
  return s === false || (typeof s === 'object' && s !== null && Object.keys(s).length === 1 && JSON.stringify(s.not) === '{}');
}

/** ok checks a successful tool result and returns its structuredContent. */
function ok(result, label) {
  assert.notEqual(result.isError, true, `${label}: tool error ${result.content?.[0]?.text}`);
  const sc = result.structuredContent;
  assert.equal(typeof sc, 'object', `${label}: no structuredContent in ${JSON.stringify(result)}`);
  const text = result.content?.find((c) => c.type === 'text');
  assert.ok(text, `${label}: no text content beside structuredContent`);
  assert.deepEqual(JSON.parse(text.text), sc, `${label}: the text content is not the structuredContent's JSON`);
  return sc;
}

/** refused checks a tool error with reason and returns its parsed body. */
function refused(result, reason, label) {
  assert.equal(result.isError, true, `${label}: expected a ${reason} tool error, got ${JSON.stringify(result)}`);
  assert.equal(result.content?.[0]?.type, 'text', `${label}: a tool error's first content is text`);
  let body;
  try {
    body = JSON.parse(result.content[0].text);
  } catch {
    assert.fail(`${label}: the tool error's text is not JSON: ${result.content[0].text}`);
  }
  assert.equal(body.reason, reason, `${label}: ${result.content[0].text}`);
  assert.ok(typeof body.error === 'string' && body.error !== '', `${label}: no error message in ${result.content[0].text}`);
  return body;
}

/** assertWait checks the wait a rate_limited answer (tool error or HTTP) names. */
function assertWait(body, label) {
  assert.ok(Number.isInteger(body.retry_after_seconds) && body.retry_after_seconds > 0 && body.retry_after_seconds <= 3600,
    `${label}: retry_after_seconds ${body.retry_after_seconds}`);
  const next = Date.parse(body.next_allowed_at);
  assert.ok(Number.isFinite(next) && next > Date.now(), `${label}: next_allowed_at ${body.next_allowed_at} is not a future time`);
}

/** withoutCountdowns is v without the fields that count down by the second. */
function withoutCountdowns(v) {
  if (Array.isArray(v)) return v.map(withoutCountdowns);
  if (typeof v !== 'object' || v === null) return v;
  const countdowns = ['retry_after_seconds', 'next_allowed_at', 'reset_seconds'];
  return Object.fromEntries(Object.entries(v).filter(([k]) => !countdowns.includes(k)).map(([k, x]) => [k, withoutCountdowns(x)]));
}

/** httpDrip is a curl-style drip: v1 (query) or v3 (JSON body). */
async function httpDrip(base, version, asset, address) {
  const r = version === 'v1'
    ? await fetch(`${base}/extended/v1/faucets/${asset}?address=${encodeURIComponent(address)}`, { method: 'POST' })
    : await fetch(`${base}/extended/v3/faucets/${asset}`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ address }),
    });
  return { status: r.status, headers: r.headers, body: await r.json() };
}

async function getJSON(url) {
  const r = await fetch(url);
  assert.equal(r.status, 200, `GET ${url}: HTTP ${r.status}`);
  return r.json();
}

export function registerTests(opts) {
  describe('MCP endpoint, official TypeScript client', () => {
    const faucets = new Set();
    let faucet = null;
    let client = null;
    let info = null; // GET /faucet/v1/info of the main faucet
    let anyFailed = false;
    const drips = {}; // asset → {address, txid} of the first MCP drips

    killOnExit(faucets);

    /** launch starts `faucet serve --devnet` with extra flags on a free port and waits for it. */
    const launch = async (extra) => {
      const port = await freePort();
      const f = new ServerProcess(opts.faucet, port,
        ['serve', '--devnet', '--listen', `127.0.0.1:${port}`, '--log-format', 'text', ...extra]);
      faucets.add(f);
      f.start();
      await f.waitReady();
      return f;
    };

    // step runs a scenario once the steps it needs have passed.
    const passed = new Set();
    const step = (name, needs, fn) => test(name, async (t) => {
      const missing = needs.find((n) => !passed.has(n));
      if (missing) {
        t.skip(`needs "${missing}"`);
        return;
      }
      try {
        await fn(t);
        passed.add(name);
      } catch (err) {
        anyFailed = true;
        throw err;
      }
    });

    const call = (name, args) => client.callTool({ name, arguments: args });
    const amountOf = (asset) => String(info.assets.find((a) => a.asset === asset).amount);

    /** dripOK calls request_drip and checks its success document. */
    const dripOK = async (asset, address, label) => {
      const d = ok(await call('request_drip', { asset, address }), label);
      assert.equal(d.asset, asset, `${label}: asset`);
      assert.equal(d.address, address, `${label}: address`);
      assert.match(d.txid, TXID, `${label}: txid`);
      assert.equal(d.chain, 'stacks', `${label}: chain`);
      assert.equal(d.amount, amountOf(asset), `${label}: amount (base units, as /faucet/v1/info says)`);
      // status_url leads to the drip's status document, absolute or not.
      const status = await getJSON(new URL(d.status_url, faucet.base));
      assert.equal(status.tx_id, d.txid, `${label}: status_url ${d.status_url} names another drip`);
      return d;
    };

    after(async () => {
      await client?.close().catch(() => {});
      if (anyFailed) {
        for (const f of faucets) {
          const state = f.running() ? 'running' : `exited ${JSON.stringify(f.exit)}`;
          console.error(`# log tail of ${f.command} (${state}):\n${f.tail()}`);
        }
      }
      await Promise.all([...faucets].map((f) => f.stop()));
    });

    step('faucet starts', [], async () => {
      faucet = await launch(faucetArgs);
      info = await getJSON(`${faucet.base}/faucet/v1/info`);
      for (const asset of ['stx', 'sbtc']) {
        const a = info.assets.find((x) => x.asset === asset);
        assert.ok(a, `/faucet/v1/info lists no ${asset}: ${JSON.stringify(info.assets)}`);
        assert.equal(a.state, 'ready', `${asset} is not ready: ${a.state_message}`);
      }
    });

    const initialized = '/mcp answers initialize statelessly, in JSON';
    step(initialized, ['faucet starts'], async () => {
      const r = await fetch(`${faucet.base}/mcp`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0', id: 1, method: 'initialize',
          params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
        }),
      });
      const text = await r.text();
      assert.equal(r.status, 200, `POST /mcp initialize: HTTP ${r.status} ${text}`);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json\b/, 'a JSON response, not an event stream');
      assert.equal(r.headers.get('mcp-session-id'), null, 'stateless: no Mcp-Session-Id');
      const { result } = JSON.parse(text);
      assert.equal(result?.serverInfo?.name, SERVER_NAME, text);
      assert.ok(SUPPORTED_PROTOCOL_VERSIONS.includes(result.protocolVersion), `protocol version ${result.protocolVersion}`);
      assert.ok(result.capabilities?.tools, `no tools capability: ${text}`);
    });

    let tools = [];
    step('the client connects', ['faucet starts'], async () => {
      client = new Client({ name: 'faucet-mcptest', version: '0.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`${faucet.base}/mcp`));
      await client.connect(transport);
      assert.equal(client.getServerVersion()?.name, SERVER_NAME);
      assert.ok(client.getServerCapabilities()?.tools, 'the server offers tools');
      assert.equal(transport.sessionId, undefined, 'stateless: no session');
      // listTools also makes the client check every later structuredContent
      // against the tool's output schema.
      ({ tools } = await client.listTools());
    });

    const connected = ['the client connects'];

    step('listTools: exactly the four tools, their input and output schemas', connected, async () => {
      assert.deepEqual(tools.map((t) => t.name).sort(), Object.keys(TOOLS).sort());
      for (const tool of tools) {
        const want = TOOLS[tool.name];
        const s = tool.inputSchema;
        assert.equal(s.type, 'object', `${tool.name}: input schema type`);
        assert.ok(isFalseSchema(s.additionalProperties), `${tool.name}: additionalProperties ${JSON.stringify(s.additionalProperties)}`);
        // The contract's properties, with their types; any more are optional.
        for (const [prop, type] of Object.entries(want.properties)) {
          assert.equal(s.properties?.[prop]?.type, type, `${tool.name}.${prop}: type (properties: ${Object.keys(s.properties ?? {})})`);
        }
        assert.deepEqual([...(s.required ?? [])].sort(), want.required, `${tool.name}: required`);
        assert.ok(typeof tool.description === 'string' && tool.description !== '', `${tool.name}: description`);
      }
      const noOutput = tools.filter((t) => t.outputSchema?.type !== 'object').map((t) => t.name);
      assert.deepEqual(noOutput, [], 'every tool has an object output schema');
      const drip = tools.find((t) => t.name === 'request_drip').inputSchema.properties;
      if (drip.size.enum) assert.deepEqual([...drip.size.enum].sort(), SIZES, 'request_drip.size enum');
      if (drip.asset.enum) {
        assert.ok(['stx', 'sbtc'].every((a) => drip.asset.enum.includes(a)), `request_drip.asset enum ${drip.asset.enum}`);
      }
    });

    step('get_faucet_info is /faucet/v1/info and lists stx and sbtc', connected, async () => {
      const got = ok(await call('get_faucet_info', {}), 'get_faucet_info');
      const names = got.assets.map((a) => a.asset);
      assert.ok(names.includes('stx') && names.includes('sbtc'), `assets ${names}`);
      const now = await getJSON(`${faucet.base}/faucet/v1/info`);
      assert.deepEqual(names, now.assets.map((a) => a.asset), 'the same assets, in the same order');
      assert.equal(got.network, now.network);
      for (const a of got.assets) {
        const h = now.assets.find((x) => x.asset === a.asset);
        assert.equal(a.amount, h.amount, `${a.asset} amount`);
        assert.deepEqual(a.limits, h.limits, `${a.asset} limits`);
      }
    });

    const dripped = 'request_drip pays STX and sBTC, get_drip_status follows both to confirmed';
    step(dripped, connected, async () => {
      for (const asset of ['stx', 'sbtc']) {
        const address = testnetAddress();
        drips[asset] = { address, txid: (await dripOK(asset, address, `request_drip ${asset}`)).txid };
      }
      // A txid the faucet never sent is no error, just unknown.
      const none = ok(await call('get_drip_status', { txid: `0x${'0'.repeat(64)}` }), 'get_drip_status of an unknown txid');
      assert.equal(none.state, 'unknown');

      const deadline = Date.now() + 60_000;
      await Promise.all(Object.entries(drips).map(async ([asset, { address, txid }]) => {
        let s;
        for (;;) {
          s = ok(await call('get_drip_status', { txid }), `get_drip_status ${asset}`);
          assert.equal(s.tx_id, txid);
          assert.ok(['pending', 'confirmed'].includes(s.state), `${asset} drip ${txid}: ${s.state} (${s.message})`);
          if (s.state === 'confirmed' || Date.now() > deadline) break;
          await sleep(1000);
        }
        assert.equal(s.state, 'confirmed', `${asset} drip ${txid} not confirmed within 60 s`);
        assert.ok(Number.isInteger(s.block_height) && s.block_height > 0, `block_height ${s.block_height}`);
        assert.equal(s.recipient, address);
        assert.equal(s.asset, asset);
        assert.equal(s.amount, amountOf(asset));
        // The same document as the HTTP API's (a confirmed drip no longer changes).
        assert.deepEqual(s, await getJSON(`${faucet.base}/faucet/v1/drips/${txid}`), 'get_drip_status is /faucet/v1/drips/{txid}');
      }));
    });

    step('a second drip to the same address (STX, sBTC) is a rate_limited tool error', [dripped], async () => {
      for (const asset of ['stx', 'sbtc']) {
        const body = refused(await call('request_drip', { asset, address: drips[asset].address }), 'rate_limited', `second ${asset} drip`);
        assertWait(body, `second ${asset} drip`);
      }
    });

    step('MCP and HTTP drips share one limit', connected, async () => {
      // HTTP first, then the agent.
      const a = testnetAddress();
      const v1 = await httpDrip(faucet.base, 'v1', 'stx', a);
      assert.equal(v1.status, 200, `HTTP v1 drip to ${a}: ${JSON.stringify(v1.body)}`);
      assert.match(v1.body.txId, TXID);
      assertWait(refused(await call('request_drip', { asset: 'stx', address: a }), 'rate_limited', 'MCP after HTTP v1'), 'MCP after HTTP v1');

      // The agent first, then curl.
      const b = testnetAddress();
      await dripOK('stx', b, 'MCP drip');
      const v3 = await httpDrip(faucet.base, 'v3', 'stx', b);
      assert.equal(v3.status, 429, `HTTP v3 drip after MCP: ${v3.status} ${JSON.stringify(v3.body)}`);
      const policy = v3.headers.get('ratelimit-policy');
      const limit = v3.headers.get('ratelimit');
      assert.ok(policy, 'a 429 carries RateLimit-Policy');
      assert.ok(limit, 'a 429 carries RateLimit');
      // A policy is named first, as a string or a token ("address";q=1;w=3600).
      assert.match(policy, /^\s*("[^"]+"|[A-Za-z*][\w.*:/-]*)/, `RateLimit-Policy: ${policy}`);
      assert.match(limit, /^\s*("[^"]+"|[A-Za-z*][\w.*:/-]*)/, `RateLimit: ${limit}`);
      assert.match(policy, /\baddress\b/, `RateLimit-Policy names the address limit: ${policy}`);

      // sBTC's bucket is its own: an STX-limited address still gets sBTC, then is limited there too.
      await dripOK('sbtc', b, 'MCP sBTC drip to an STX-limited address');
      const sb = await httpDrip(faucet.base, 'v1', 'sbtc', b);
      assert.equal(sb.status, 429, `HTTP v1 sBTC drip after MCP: ${sb.status} ${JSON.stringify(sb.body)}`);
      assert.equal(sb.body.reason, 'rate_limited');
    });

    step('check_eligibility agrees with the next request', connected, async () => {
      const c = testnetAddress();
      const fresh = ok(await call('check_eligibility', { asset: 'stx', address: c }), 'eligibility of a fresh address');
      assert.equal(fresh.asset, 'stx');
      assert.equal(fresh.address, c);
      assert.equal(fresh.eligible, true, `a fresh address: ${JSON.stringify(fresh)}`);
      assert.equal(fresh.amount, amountOf('stx'));
      await dripOK('stx', c, 'drip after eligible:true');

      const limited = ok(await call('check_eligibility', { asset: 'stx', address: c }), 'eligibility of a limited address');
      assert.equal(limited.eligible, false, `a limited address: ${JSON.stringify(limited)}`);
      assert.equal(limited.reason, 'rate_limited');
      assertWait(limited, 'eligibility of a limited address');
      refused(await call('request_drip', { asset: 'stx', address: c }), 'rate_limited', 'drip after eligible:false');

      // The same document as GET /faucet/v1/eligibility, but for the
      // countdowns, which may tick between the two answers.
      const http = await getJSON(`${faucet.base}/faucet/v1/eligibility?asset=stx&address=${c}`);
      assert.ok(Math.abs(limited.retry_after_seconds - http.retry_after_seconds) <= 1, 'the same wait');
      assert.deepEqual(withoutCountdowns(limited), withoutCountdowns(http), 'check_eligibility is /faucet/v1/eligibility');

      // sBTC's limit is its own: c may still have sBTC.
      const sbtc = ok(await call('check_eligibility', { asset: 'sbtc', address: c }), 'sBTC eligibility');
      assert.equal(sbtc.eligible, true, `sBTC for an STX-limited address: ${JSON.stringify(sbtc)}`);
      assert.equal(sbtc.amount, amountOf('sbtc'));
    });

    step('bad and mainnet addresses: tool errors with the HTTP reasons', connected, async () => {
      const bad = 'ST1NOTANADDRESS';
      const mainnet = mainnetAddress();
      for (const tool of ['check_eligibility', 'request_drip']) {
        refused(await call(tool, { asset: 'stx', address: bad }), 'invalid_address', `${tool} ${bad}`);
        refused(await call(tool, { asset: 'stx', address: mainnet }), 'mainnet_address', `${tool} ${mainnet}`);
      }
      // The HTTP API names the same reasons.
      assert.equal((await httpDrip(faucet.base, 'v1', 'stx', mainnet)).body.reason, 'mainnet_address');
      assert.equal((await httpDrip(faucet.base, 'v1', 'stx', bad)).body.reason, 'invalid_address');
    });

    step('an unknown asset: a tool error with reason unknown_asset', connected, async () => {
      for (const tool of ['check_eligibility', 'request_drip']) {
        refused(await call(tool, { asset: 'doge', address: testnetAddress() }), 'unknown_asset', `${tool} doge`);
      }
    });

    // Needs /mcp shown on by default, so that its 404 means --mcp=false.
    step('with --mcp=false /mcp is a 404', [initialized], async () => {
      const off = await launch(['--devnet-btc=false', '--mcp=false']);
      try {
        for (const method of ['POST', 'GET']) {
          const r = await fetch(`${off.base}/mcp`, {
            method,
            headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
            body: method === 'POST' ? JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) : undefined,
          });
          await r.arrayBuffer();
          assert.equal(r.status, 404, `${method} /mcp with --mcp=false`);
        }
        assert.equal((await fetch(`${off.base}/faucet/v1/info`)).status, 200, 'the rest of the faucet still answers');
      } finally {
        await off.stop();
      }
    });
  });
}
