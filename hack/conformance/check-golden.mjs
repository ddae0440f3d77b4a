#!/usr/bin/env node
// Rebuilds three known transactions (a token transfer, a send-many contract
// call and an sBTC SIP-010 transfer) with the installed stacks.js and compares them byte for byte with the
// expected serializations. Exits 1 on any difference.
//
//   node hack/conformance/check-golden.mjs

import { fileURLToPath } from 'node:url';
import {
  makeContractCallVector,
  makeSIP010Vector,
  makeVector,
  SBTC_TESTNET,
  SEND_MANY_MEMO_TESTNET,
  TESTNET_CHAIN_ID,
} from './vector.mjs';

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

// The same one as goldenCallTxRaw in server/chain/stacks/contractcall_test.go.
export const GOLDEN_CALL = {
  senderKey: GOLDEN.senderKey,
  nonce: 7n,
  fee: 3000n,
  chainId: TESTNET_CHAIN_ID,
  contract: SEND_MANY_MEMO_TESTNET,
  functionName: 'send-many',
  recipients: [
    { to: 'ST2TJRHDHMYBQ417HFB0BDX430TQA5PXRX6495G1V', ustx: 1000000n, memo: '666175636574' },
    { to: 'ST2TJRHDHMYBQ417HFB0BDX430TQA5PXRX6495G1V.my-contract', ustx: 1n, memo: '' },
  ],
  pcPrincipal: 'sender',
  want: {
    txRaw:
      '80800000000400164247d6f2b425ac5771423ae6c80c754f7172b000000000000000070000000000000bb8' +
      '0001d55802ea247131f4790479074241a96a80bfbf4b8aa378d1ef401aa055250b3f3ecc01fe0a11b41603a30ce47d3c6d2301853a31d94fe8c68dda3f73e96020670' +
      '3020000000100021a164247d6f2b425ac5771423ae6c80c754f7172b00100000000000f4241' +
      '021ade1e92f0d8b34475a937485a1b1abf66a0dbf2ff0e73656e642d6d616e792d6d656d6f0973656e642d6d616e79000000010b00000002' +
      '0c00000003046d656d6f020000000666617563657402746f051ab52c45b1a7977204f17ac0b6f48306aea2dbb8e9047573747801000000000000000000000000000f4240' +
      '0c00000003046d656d6f020000000002746f061ab52c45b1a7977204f17ac0b6f48306aea2dbb8e90b6d792d636f6e747261637404757374780100000000000000000000000000000001',
    txId: '0x9e02e3088da376c0d7f1f3966bd5b856e7a430b06e09a3b8dd609625c1cf3bde',
    senderAddress: 'STB44HYPYAT2BB2QE513NSP81HTMYWBJP02HPGK6',
  },
};

// The same one as goldenSIP010TxRaw in server/chain/stacks/token_test.go:
// 100000 sats of testnet sBTC, no memo, Pc.principal(sender).willSendEq(100000).ft(…).
export const GOLDEN_SIP010 = {
  senderKey: GOLDEN.senderKey,
  nonce: 12n,
  fee: 2500n,
  chainId: TESTNET_CHAIN_ID,
  asset: SBTC_TESTNET,
  amount: 100000n,
  recipient: GOLDEN.recipient,
  memoHex: null,
  postConditions: [{ principal: 'sender', code: 'eq', amount: 100000n, asset: SBTC_TESTNET }],
  want: {
    txRaw:
      '80800000000400164247d6f2b425ac5771423ae6c80c754f7172b0000000000000000c00000000000009c4' +
      '0000fe38c9f5e5cff848b10adc5c7fae12d43cd38b27ab5d4f6b4e4cbd72b7fe4dee1df952c61bcf73402568a1000db7e54f4a2dee53c4717a6aed9d814ceff2e1b8' +
      '030200000001' +
      '01021a164247d6f2b425ac5771423ae6c80c754f7172b01a5e7ba8546bc27ca0077594336b3942a8e7f893520a736274632d746f6b656e0a736274632d746f6b656e0100000000000186a0' +
      '021a5e7ba8546bc27ca0077594336b3942a8e7f893520a736274632d746f6b656e087472616e73666572000000040100000000000000000000000000' +
      '0186a0051a164247d6f2b425ac5771423ae6c80c754f7172b0051ab52c45b1a7977204f17ac0b6f48306aea2dbb8e909',
    txId: '0x85f6a4c77aa7db84e13bc7311e500f321449b6b5767e890a2d3a962adf8a1684',
    senderAddress: 'STB44HYPYAT2BB2QE513NSP81HTMYWBJP02HPGK6',
  },
};

/** Returns a list of mismatch descriptions (empty when every golden vector reproduces). */
export async function checkGolden() {
  const problems = [];
  const compare = (label, got, want) => {
    for (const k of Object.keys(want)) {
      if (got[k] !== want[k]) problems.push(`${label} ${k}:\n  got  ${got[k]}\n  want ${want[k]}`);
    }
  };
  {
    const { want, ...spec } = GOLDEN;
    compare('transfer', await makeVector(spec), want);
  }
  {
    const { want, ...spec } = GOLDEN_CALL;
    compare('send-many', await makeContractCallVector(spec), want);
  }
  {
    const { want, ...spec } = GOLDEN_SIP010;
    compare('sip010', await makeSIP010Vector(spec), want);
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const problems = await checkGolden();
  if (problems.length > 0) {
    process.stderr.write(`golden vector MISMATCH\n${problems.join('\n')}\n`);
    process.exit(1);
  }
  process.stderr.write('golden vectors OK (transfer, send-many and SIP-010: txRaw, txId, senderAddress match)\n');
}
