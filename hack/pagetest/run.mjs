#!/usr/bin/env node
// Page tests of the faucet's web page (server/web).
//
//   node hack/pagetest/run.mjs --faucet bin/faucet --oidc-provider bin/oidc-provider --out bin
//   node hack/pagetest/run.mjs --validator-only
//
// First the page's pure modules run in Node: the address validator against
// c32check on random vectors, the Bitcoin address validator on the BIP
// vectors, SHA-256 against node:crypto, the proof of work and the
// formatting. Then devnet faucets (STX, sBTC, tUSD and BTC on a regtest
// btcd; sBTC off; sBTC unavailable, BTC off; a small STX budget; sign-in
// with the test OpenID provider, --oidc-provider) are started from
// --faucet and Debian's chromium drives the page through playwright-core,
// dripping each asset and reading the recipient's balance back;
// screenshots go to --out. The faucets and the provider are always
// stopped; any failure exits non-zero.
//
// Environment: CHROMIUM (browser binary, default /usr/bin/chromium),
// FAUCET_BTCD (the btcd the devnet runs; default bin/btcd, else a btcd
// beside --faucet), PAGETEST_SEED (reproduce the random validator vectors),
// PAGETEST_HEADED=1.

import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { parseFlags, registerUnlessMissing, runTests } from '../jsharness/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const USAGE = 'node hack/pagetest/run.mjs [--faucet bin/faucet] [--oidc-provider bin/oidc-provider] [--out bin] [--validator-only]';

await runTests(async () => {
  const args = parseFlags('pagetest', USAGE, {
    faucet: { type: 'string', default: path.join(repo, 'bin', 'faucet') },
    'oidc-provider': { type: 'string', default: path.join(repo, 'bin', 'oidc-provider') },
    out: { type: 'string', default: path.join(repo, 'bin') },
    'validator-only': { type: 'boolean', default: false },
  });

  const { registerValidatorTests } = await import('./validator.mjs');
  registerValidatorTests();
  if (args['validator-only']) return;
  const { preflight, registerBrowserTests } = await import('./browser.mjs');
  const faucet = path.resolve(args.faucet);
  const opts = {
    faucet,
    oidcProvider: path.resolve(args['oidc-provider']),
    out: path.resolve(args.out),
    chromium: process.env.CHROMIUM || '/usr/bin/chromium',
    headed: process.env.PAGETEST_HEADED === '1',
    btcd: await findBtcd(faucet),
  };
  await registerUnlessMissing('browser test prerequisites', () => preflight(opts), () => registerBrowserTests(opts));
});

/**
 * findBtcd is the btcd the devnet faucets run: $FAUCET_BTCD, else the
 * repository's bin/btcd (make btcd), else one beside the faucet binary.
 */
async function findBtcd(faucet) {
  if (process.env.FAUCET_BTCD) return path.resolve(process.env.FAUCET_BTCD);
  const { access, constants } = await import('node:fs/promises');
  for (const p of [path.join(repo, 'bin', 'btcd'), path.join(path.dirname(faucet), 'btcd')]) {
    try {
      await access(p, constants.X_OK);
      return p;
    } catch {
      // try the next one
    }
  }
  return path.join(repo, 'bin', 'btcd'); // preflight says it is missing
}
