#!/usr/bin/env node
// MCP test: the faucet's /mcp endpoint through the official TypeScript MCP
// client (@modelcontextprotocol/sdk) against a devnet faucet.
//
//   node hack/mcptest/run.mjs --faucet bin/faucet
//
// Starts `faucet serve --devnet` on a free port (and, for one step, a second
// one with --mcp=false), always stops them (SIGTERM, then SIGKILL), prints
// their log tail when a step fails and exits non-zero on any failure.

import { execFile, spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');

// node:test prints TAP when its output is not a terminal (make, CI); run
// once more with the spec reporter, which reads better in a log.
if (!process.execArgv.some((a) => a.startsWith('--test-reporter'))) {
  const child = spawn(process.execPath, ['--test-reporter=spec', ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else {
  await main();
}

async function main() {
  let args;
  try {
    ({ values: args } = parseArgs({
      options: {
        faucet: { type: 'string', default: path.join(repo, 'bin', 'faucet') },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (err) {
    console.error(`mcptest: ${err.message}`);
    process.exit(2);
  }
  if (args.help) {
    console.log('usage: node hack/mcptest/run.mjs [--faucet bin/faucet]');
    process.exit(0);
  }

  const { test } = await import('node:test');
  const opts = { faucet: path.resolve(args.faucet) };
  // A missing or old binary fails once, clearly, instead of in every step.
  const problem = await preflight(opts.faucet).then(() => null, (err) => err);
  if (problem) {
    test('MCP test prerequisites', () => {
      throw problem;
    });
    return;
  }
  const { registerTests } = await import('./mcp.mjs');
  registerTests(opts);
}

/** preflight checks that faucet exists and knows the flags the test uses. */
async function preflight(faucet) {
  try {
    await access(faucet, constants.X_OK);
  } catch {
    throw new Error(`no faucet binary at ${faucet}: run make build (or pass --faucet)`);
  }
  let help;
  try {
    const r = await promisify(execFile)(faucet, ['serve', '--help']);
    help = r.stdout + r.stderr;
  } catch (err) {
    help = `${err.stdout ?? ''}${err.stderr ?? ''}`;
  }
  for (const flag of ['-mcp', '-sbtc-limit-address', '-devnet-btc']) {
    if (!new RegExp(`${flag}\\b`).test(help)) {
      throw new Error(`${faucet} has no ${flag} flag: it predates ${flag === '-mcp' ? 'the MCP endpoint' : 'this test'}; rebuild it (make build)`);
    }
  }
}
