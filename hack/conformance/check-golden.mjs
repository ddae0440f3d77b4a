#!/usr/bin/env node
// Rebuilds one known transaction with the installed stacks.js and compares it
// byte for byte with the expected serialization. Exits 1 on any difference.
//
//   node hack/conformance/check-golden.mjs

import { fileURLToPath } from 'node:url';
import { makeVector, TESTNET_CHAIN_ID } from './vector.mjs';

export const GOLDEN = {
  senderKey: 'cb3df38053d132895220b9ce471f6b676db5b9bf0b4adefb55f2118ece2478df01',
  recipient: 'ST2TJRHDHMYBQ417HFB0BDX430TQA5PXRX6495G1V',
  amount: 500000n,
  nonce: 50n,
  fee: 180n,
  memo: 'Faucet',
  chainId: TESTNET_CHAIN_ID,
  want: {
    txRaw:
      '80800000000400164247d6f2b425ac5771423ae6c80c754f7172b0000000000000003200000000000000b4' +
      '00008537046ff1008368baaa3ff2235122c556b89dad4f9df0639b924cf32a44b866497e49846b24191e71' +
      '1b21faaae96ca0542e4a140168484740b94211cececb3303020000000000051ab52c45b1a7977204f17ac0' +
      'b6f48306aea2dbb8e9000000000007a120466175636574000000000000000000000000000000000000000000' +
      '00000000000000',
    txId: '0xf2f0402f9f4c4d43b382690c4f7b97e24d5ff5dd5c619e3615daa64dca7ef4bc',
    senderAddress: 'STB44HYPYAT2BB2QE513NSP81HTMYWBJP02HPGK6',
  },
};

/** Returns a list of mismatch descriptions (empty when the golden vector reproduces). */
export async function checkGolden() {
  const { want, ...spec } = GOLDEN;
  const got = await makeVector(spec);
  const problems = [];
  for (const k of Object.keys(want)) {
    if (got[k] !== want[k]) problems.push(`${k}:\n  got  ${got[k]}\n  want ${want[k]}`);
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const problems = await checkGolden();
  if (problems.length > 0) {
    process.stderr.write(`golden vector MISMATCH\n${problems.join('\n')}\n`);
    process.exit(1);
  }
  process.stderr.write('golden vector OK (txRaw, txId, senderAddress match)\n');
}
