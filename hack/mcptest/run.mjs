#!/usr/bin/env node
// MCP test: the faucet's /mcp endpoint through the official TypeScript MCP
// client (@modelcontextprotocol/sdk) against a devnet faucet.
//
//   node hack/mcptest/run.mjs --faucet bin/faucet
//
// Starts `faucet serve --devnet` on a free port (and, for one step, a second
// one with --mcp=false), always stops them (SIGTERM, then SIGKILL), prints
// their log tail when a step fails and exits non-zero on any failure.

import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { parseFlags, registerUnlessMissing, runTests, serveHelp } from '../jsharness/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');

await runTests(async () => {
  const args = parseFlags('mcptest', 'node hack/mcptest/run.mjs [--faucet bin/faucet]', {
    faucet: { type: 'string', default: path.join(repo, 'bin', 'faucet') },
  });
  const opts = { faucet: path.resolve(args.faucet) };
  await registerUnlessMissing('MCP test prerequisites', () => preflight(opts.faucet), async () => {
    const { registerTests } = await import('./mcp.mjs');
    registerTests(opts);
  });
});

/** preflight checks that faucet exists and knows the flags the test uses. */
async function preflight(faucet) {
  const help = await serveHelp(faucet);
  for (const flag of ['-mcp', '-sbtc-limit-address', '-devnet-btc']) {
    if (!new RegExp(`${flag}\\b`).test(help)) {
      throw new Error(`${faucet} has no ${flag} flag: it predates ${flag === '-mcp' ? 'the MCP endpoint' : 'this test'}; rebuild it (make build)`);
    }
  }
}
