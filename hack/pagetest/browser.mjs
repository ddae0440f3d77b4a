// Browser tests: devnet faucets (the real bin/faucet) and Debian's
// chromium driven by playwright-core. The main faucet drips every asset its
// devnet lists: STX, sBTC, the test token tUSD and BTC (a real btcd in
// regtest mode); each is dripped through the page and the recipient's
// balance read back from the node. Short-lived faucets have sBTC off (a
// separate devnet node, as --devnet always turns sBTC on), sBTC
// unavailable (the node names no sBTC contract) with BTC off, a small STX
// budget the page drains, sign-in through the test OpenID provider
// (bin/oidc-provider, a real zitadel/oidc OP), and an event code (an API
// token) that lifts the per-IP limit.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';

import { c32addressDecode } from 'c32check';
import { chromium } from 'playwright-core';

import { ServerProcess, freePort, killOnExit, mustExecute, serveHelp } from '../jsharness/harness.mjs';
import { btcMainnetMessage } from '../../server/web/assets/btcaddr.js';
import { MAINNET_MESSAGE } from '../../server/web/assets/c32.js';
import { CODE_TEXTS } from '../../server/web/assets/eventcode.js';
import { formatAbout, formatAmount, formatLeft } from '../../server/web/assets/format.js';
import { randomRegtestAddress, randomTestnetAddress } from './validator.mjs';

const POW_DIFFICULTY = 10;
const MAINNET = 'SP3FBR2AGK5H9QBDH3EEN6DF8EK8JY7RX8QJ5SVTE';
// A checksum typo (last character) and a character that never belongs.
const TYPO = 'ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXR';
const BAD_CHARS = 'ST3M7N9Q9HDRM7RV!1Q26P0EE69358PZZAZD7KMXQ';

// A Bitcoin mainnet address (BIP-173's P2WPKH vector).
const BTC_MAINNET = 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4';

// The devnet's assets, in the order /faucet/v1/info lists them.
const DEVNET_ASSETS = ['stx', 'sbtc', 'tusd', 'btc'];

// A wait as the page counts it down (formatWait): "1 h", "1 h 5 min", "59 min 58 s", "12 s".
const WAIT = /(\d+ h( \d+ min)?|\d+ min( \d+ s)?|\d+ s)/;

/** escapeRe makes text a regular expression that matches it literally. */
const escapeRe = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const LAUNCH_ARGS = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking'];

/**
 * FaucetProcess is a ServerProcess for bin/faucet (or bin/oidc-provider);
 * nodeURL is a devnet's Stacks node, from its start-up line (node=http://…).
 */
class FaucetProcess extends ServerProcess {
  keep(line) {
    super.keep(line);
    this.nodeURL ??= /\bnode=(http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1];
  }
}

// ------------------------------------------------------- balances on chain

/** stxBalance is an address's µSTX on the Stacks node (GET /v2/accounts). */
async function stxBalance(node, address) {
  const r = await fetch(`${node}/v2/accounts/${address}?proof=0`);
  assert.equal(r.status, 200, `GET /v2/accounts/${address}: ${r.status}`);
  return BigInt((await r.json()).balance);
}

/**
 * tokenBalance is a principal's balance of a SIP-010 token (asset is
 * ADDR.contract::token), read with the contract's get-balance through the
 * node's call-read RPC: (ok uint), a 0x07 0x01 and 16 big-endian bytes.
 */
async function tokenBalance(node, asset, address) {
  const [contract, name] = asset.split('::')[0].split('.');
  const [version, hash160] = c32addressDecode(address);
  const principal = `0x05${version.toString(16).padStart(2, '0')}${hash160}`;
  const r = await fetch(`${node}/v2/contracts/call-read/${contract}/${name}/get-balance`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ sender: address, arguments: [principal] }),
  });
  const body = await r.json();
  const m = body.okay === true ? /^0x0701([0-9a-f]{32})$/.exec(body.result) : null;
  assert.ok(m, `get-balance of ${address} in ${asset}: ${JSON.stringify(body)}`);
  return BigInt(`0x${m[1]}`);
}

/** devnetArgs are `faucet serve --devnet` on port with extra flags. */
function devnetArgs(port, extra = []) {
  return ['serve', '--devnet', '--block-time', '3s', '--listen', `127.0.0.1:${port}`, '--log-format', 'text', ...extra];
}

/** preflight fails with a clear message when the tools are missing. */
export async function preflight(opts) {
  const help = await serveHelp(opts.faucet);
  await mustExecute(opts.chromium, `no chromium at ${opts.chromium}: run make chromium (hack/install-chromium.sh) or set CHROMIUM`);
  if (!help.includes('-pow-difficulty')) {
    throw new Error(`${opts.faucet} has no --pow-difficulty flag: it predates the proof of work; rebuild it (make build)`);
  }
  if (!help.includes('-sbtc-limit-address')) {
    throw new Error(`${opts.faucet} has no --sbtc-limit-address flag: it predates the sBTC faucet; rebuild it (make build)`);
  }
  if (!help.includes('-btc-block-time')) {
    throw new Error(`${opts.faucet} has no --btc-block-time flag: it predates the BTC faucet; rebuild it (make build)`);
  }
  if (!help.includes('-budget') || !help.includes('-oidc-issuer')) {
    throw new Error(`${opts.faucet} has no --budget or --oidc-issuer flag: it predates budgets and sign-in; rebuild it (make build)`);
  }
  await mustExecute(opts.oidcProvider, `no OpenID provider at ${opts.oidcProvider}: the sign-in scenario needs it; run make oidc-provider (or pass --oidc-provider)`);
  await mustExecute(opts.btcd, `no btcd at ${opts.btcd}: the devnet's BTC faucet needs it; run make btcd (or set FAUCET_BTCD)`);
}

// -------------------------------------------------------------- in the page

/** contrastProblems lists visible text below WCAG AA contrast. */
function contrastProblems() {
  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c);
    if (!m) return null;
    const p = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const lin = (v) => {
    const s = v / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  const lum = (c) => 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
  const blend = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a),
    g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a),
    a: 1,
  });
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) {
        layers.push(c);
        if (c.a >= 1) break;
      }
    }
    let bg = { r: 255, g: 255, b: 255, a: 1 };
    for (let i = layers.length - 1; i >= 0; i--) bg = blend(layers[i], bg);
    return bg;
  };
  const problems = [];
  const check = (el, text) => {
    if (!el.checkVisibility({ visibilityProperty: true, opacityProperty: true })) return;
    if (el.closest('.visually-hidden')) return;
    const cs = getComputedStyle(el);
    let fg = parse(cs.color);
    if (!fg) {
      problems.push({ text, why: `unparsed colour ${cs.color}` });
      return;
    }
    const bg = background(el);
    if (fg.a < 1) fg = blend(fg, bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(cs.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(cs.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) {
      problems.push({ text: text.slice(0, 50), ratio: Number(ratio.toFixed(2)), color: cs.color, background: `rgb(${Math.round(bg.r)}, ${Math.round(bg.g)}, ${Math.round(bg.b)})` });
    }
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent.trim();
    if (t) check(n.parentElement, t);
  }
  for (const input of document.querySelectorAll('input[type="text"]')) {
    if (input.value) check(input, `input value ${input.value}`);
  }
  return problems;
}

/** a11ySmoke checks names, landmarks and width at the current viewport. */
function a11ySmoke() {
  const issues = [];
  const nameOf = (el) => {
    const byIds = (el.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean)
      .map((id) => document.getElementById(id)?.textContent || '').join(' ').trim();
    const labels = [...(el.labels || [])].map((l) => l.textContent).join(' ').trim();
    const own = el.tagName === 'BUTTON' || el.tagName === 'A' ? el.textContent.trim() : '';
    return (el.getAttribute('aria-label') || byIds || labels || own || el.getAttribute('title') || '').trim();
  };
  for (const el of document.querySelectorAll('input, button, select, textarea, progress, a[href]')) {
    if (!nameOf(el)) issues.push(`${el.tagName.toLowerCase()}#${el.id || '?'} has no accessible name`);
  }
  for (const sel of ['main', 'header', 'footer', 'h1']) {
    const n = document.querySelectorAll(sel).length;
    if (n !== 1) issues.push(`${n} <${sel}> elements, want 1`);
  }
  for (const id of new Set([...document.querySelectorAll('[id]')].map((e) => e.id))) {
    if (document.querySelectorAll(`[id="${CSS.escape(id)}"]`).length > 1) issues.push(`duplicate id ${id}`);
  }
  for (const el of document.querySelectorAll('[aria-describedby], [aria-labelledby]')) {
    for (const attr of ['aria-describedby', 'aria-labelledby']) {
      for (const id of (el.getAttribute(attr) || '').split(/\s+/).filter(Boolean)) {
        if (!document.getElementById(id)) issues.push(`${el.id}: ${attr} names a missing #${id}`);
      }
    }
  }
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > width) {
    issues.push(`horizontal scroll: scrollWidth ${document.documentElement.scrollWidth} > ${width}`);
  }
  for (const el of document.body.querySelectorAll('*')) {
    if (!el.checkVisibility() || el.closest('.visually-hidden')) continue;
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.right > width + 0.5 || r.left < -0.5)) {
      issues.push(`${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}.${el.className} spans ${Math.round(r.left)}..${Math.round(r.right)} px, beyond ${width}`);
    }
  }
  return issues;
}

/** recordPage watches the button, the proof of work and the messages. */
function recordPage() {
  const rec = { enabledWhile: [], powTexts: [], powMax: 0, powShown: false };
  window.__pagetest = rec;
  const submit = document.getElementById('submit');
  const pow = document.getElementById('pow');
  const text = document.getElementById('pow-text');
  const progress = document.getElementById('pow-progress');
  new MutationObserver(() => {
    if (!submit.disabled) rec.enabledWhile.push(document.getElementById('address').value);
  }).observe(submit, { attributes: true });
  new MutationObserver(() => {
    if (!pow.hidden) rec.powShown = true;
    const t = text.textContent;
    if (rec.powTexts[rec.powTexts.length - 1] !== t) rec.powTexts.push(t);
    rec.powMax = Math.max(rec.powMax, progress.value / progress.max);
  }).observe(pow, { attributes: true, subtree: true, childList: true, characterData: true });
}

// ------------------------------------------------------------------ tests

export function registerBrowserTests(opts) {
  describe('web page in chromium', () => {
    /** @type {FaucetProcess} */
    let faucet = null;
    let browser = null;
    let context = null;
    let page = null;
    let base = '';
    const requests = [];
    const consoleProblems = [];
    let failed = null; // the first failed step: later steps depend on it
    let address = '';
    let txid = '';
    let firstTip = 0;
    let node = ''; // the main faucet's Stacks node
    const balanceBefore = {}; // the recipient's balance of each asset before its drip
    let sbtc = null; // the main faucet's sBTC entry of /faucet/v1/info
    let sbtcTxid = '';
    let tusd = null; // the main faucet's tUSD entry
    let tusdTxid = '';
    let btc = null; // the main faucet's BTC entry of /faucet/v1/info
    let btcAddress = '';
    let btcTxid = '';
    let stxOnly = null; // {node, faucet} with sBTC off, started by its step
    const procs = new Set(); // every process started, killed on exit

    killOnExit(procs);

    /**
     * launch starts a bin/faucet command (or bin's) on port, by default a
     * free one, and waits for it.
     */
    const launch = async (argsFor, readyPath, { bin = opts.faucet, port = null } = {}) => {
      port ??= await freePort();
      // Every devnet finds the same btcd (--devnet-btc=false turns it off).
      const p = new FaucetProcess(bin, port, argsFor(port), { readyPath, env: { ...process.env, FAUCET_BTCD: opts.btcd } });
      procs.add(p);
      p.start();
      await p.waitReady(60_000);
      return p;
    };

    // step runs a scenario after the steps it needs: by default every
    // earlier one; needs lists the names of the only ones it depends on.
    const passed = new Set();
    const step = (name, fn, { needs = null } = {}) => test(name, async (t) => {
      const missing = needs ? needs.filter((n) => !passed.has(n)) : failed ? [failed] : [];
      if (missing.length > 0) {
        t.skip(`needs the earlier step "${missing[0]}"`);
        return;
      }
      try {
        await fn(t);
        passed.add(name);
      } catch (err) {
        failed ??= name;
        for (const p of procs) {
          if (!p.stopping && !p.running()) {
            err.message += `\n  ${p.command} exited (${JSON.stringify(p.exit)}):\n${p.tail()}`;
          }
        }
        throw err;
      }
    });

    const shot = async (name, fullPage = false, p = page) => {
      const file = path.join(opts.out, name);
      await p.screenshot({ path: file, fullPage });
      console.log(`# screenshot ${file}`);
    };

    // layoutChecks: at 360 px (after scrolling to scrollTo) and on a
    // desktop, in light and dark, no horizontal scroll at 360 px, every
    // control named, enough contrast; at360(scheme) runs after each 360 px
    // scheme's checks. It ends light, on a desktop.
    const layoutChecks = async (label, scrollTo, at360 = async () => {}) => {
      await page.setViewportSize({ width: 360, height: 800 });
      await page.locator(scrollTo).scrollIntoViewIfNeeded();
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 360), `scrollWidth > 360${label}`);
        assert.deepEqual(await page.evaluate(a11ySmoke), [], `accessibility smoke (${scheme}, 360 px${label})`);
        assert.deepEqual(await page.evaluate(contrastProblems), [], `contrast (${scheme}, 360 px${label})`);
        await at360(scheme);
      }
      await page.setViewportSize({ width: 1280, height: 900 });
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        assert.deepEqual(await page.evaluate(a11ySmoke), [], `accessibility smoke (${scheme}, desktop${label})`);
        assert.deepEqual(await page.evaluate(contrastProblems), [], `contrast (${scheme}, desktop${label})`);
      }
      await page.emulateMedia({ colorScheme: 'light' });
    };

    // keyboardDrip drips the chosen token by keyboard alone (Tab from the
    // chooser to the address, Enter), waits for a txid other than old, and
    // returns it with the drip requests the page made.
    const keyboardDrip = async (label, old) => {
      const from = extendedRequests().length;
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'address', 'Tab from the chooser reaches the address');
      await page.keyboard.press('Enter');
      await page.waitForFunction((prev) => {
        const t = document.getElementById('txid').textContent;
        return !document.getElementById('tx').hidden && t !== prev && /^0x[0-9a-f]{64}$/.test(t);
      }, old, { timeout: 30_000 }).catch(async (err) => {
        throw new Error(`no ${label} txid: ${err.message}; result says ${JSON.stringify(await page.locator('#result').textContent())}`);
      });
      const drips = extendedRequests().slice(from);
      assert.equal(drips.length, 1, `drip requests: ${JSON.stringify(drips.map((r) => r.url))}`);
      return { txid: await page.locator('#txid').textContent(), drip: drips[0] };
    };

    const typeInto = async (value, p = page) => {
      const field = p.locator('#address');
      await field.fill('');
      await field.pressSequentially(value, { delay: 8 });
      // Past the 150 ms debounce.
      await p.waitForTimeout(350);
    };

    /** watch records a page's requests into list and its console problems. */
    const watch = (p, list) => {
      p.on('request', async (r) => {
        const entry = { url: r.url(), method: r.method(), headers: {}, body: r.postData() };
        list.push(entry);
        try {
          entry.headers = await r.allHeaders();
        } catch {
          // the page moved on
        }
      });
      p.on('console', (m) => {
        if (m.type() !== 'error' && m.type() !== 'warning') return;
        // Chromium logs every 4xx/5xx fetch; those answers are expected here.
        if (/^Failed to load resource: the server responded with a status of/.test(m.text())) return;
        consoleProblems.push(`${m.type()}: ${m.text()}`);
      });
      p.on('pageerror', (err) => consoleProblems.push(`page error: ${err.message}`));
    };

    const extendedRequests = (list = requests) => list.filter((r) => new URL(r.url).pathname.startsWith('/extended/'));

    /** assertProof checks a drip request's proof-of-work headers. */
    const assertProof = (headers) => {
      const token = headers['x-faucet-challenge'];
      const solution = headers['x-faucet-solution'];
      assert.ok(token && /^\d+$/.test(solution || ''), `proof headers: ${JSON.stringify(headers)}`);
      const digest = createHash('sha256').update(`${token}:${solution}`).digest();
      const zeros = digest.findIndex((b) => b !== 0) * 8 + Math.clz32(digest[digest.findIndex((b) => b !== 0)]) - 24;
      assert.ok(zeros >= POW_DIFFICULTY, `the solution has ${zeros} zero bits`);
    };

    /** waitText waits until #id's text matches re; the failure says what it was. */
    const waitText = async (p, id, re, timeout = 30_000) => {
      await p.waitForFunction(([i, src]) => new RegExp(src).test(document.getElementById(i).textContent), [id, re.source], { timeout })
        .catch(async (err) => {
          throw new Error(`${err.message}; #${id} says ${JSON.stringify(await p.locator(`#${id}`).textContent())}`);
        });
      return p.locator(`#${id}`).textContent();
    };

    const waitReadyState = (p, state = 'ready') => p.waitForFunction(
      (s) => document.getElementById('faucet-state').dataset.state === s, state, { timeout: 15_000 });

    /** focusRing is the active element's id and its (or its segment's) outline. */
    const focusRing = (p) => p.evaluate(() => {
      const el = document.activeElement;
      const ringed = el.closest('.segment') || el;
      const cs = getComputedStyle(ringed);
      return { id: el.id, checked: el.checked, outline: cs.outlineStyle, width: parseFloat(cs.outlineWidth) };
    });

    const getInfo = async (b) => (await fetch(`${b}/faucet/v1/info`)).json();

    /** btcBalance is a Bitcoin address's confirmed satoshis, from the faucet's v1 BTC balance route (the node's). */
    const btcBalance = async (a) => {
      const r = await fetch(`${base}/extended/v1/faucets/btc/${a}`);
      const body = await r.json();
      assert.ok(r.status === 200 && Number.isFinite(body.balance), `GET /extended/v1/faucets/btc/${a}: ${r.status} ${JSON.stringify(body)}`);
      return BigInt(Math.round(body.balance * 1e8));
    };

    before(async () => {
      await mkdir(opts.out, { recursive: true });
      // sBTC and BTC have their own buckets: one an hour, so the page meets
      // their 429s. The devnet's btcd mines every 2 s, so a BTC drip is
      // confirmed within the step.
      faucet = await launch((port) => devnetArgs(port, ['--pow-difficulty', String(POW_DIFFICULTY),
        '--limit-address', '1/1h', '--sbtc-limit-address', '1/1h', '--btc-limit-address', '1/1h', '--btc-block-time', '2s']));
      base = faucet.base;
      node = faucet.nodeURL;
      assert.match(node ?? '', /^http:/, `no node=… in the faucet's log:\n${faucet.tail()}`);
      browser = await chromium.launch({
        executablePath: opts.chromium,
        headless: !opts.headed,
        args: opts.headed ? LAUNCH_ARGS.filter((a) => !a.startsWith('--headless')) : LAUNCH_ARGS,
      });
      context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light', reducedMotion: 'reduce' });
      page = await context.newPage();
      watch(page, requests);
    });

    after(async () => {
      await browser?.close().catch(() => {});
      for (const p of procs) await p.stop();
      if (signIn.dir) await rm(signIn.dir, { recursive: true, force: true });
      if (event.dir) await rm(event.dir, { recursive: true, force: true });
      if (faucet) console.log(`# faucet stopped (${JSON.stringify(faucet.exit)})`);
    });

    const SERVED = 'the page is served with its security headers';
    const LOADED = 'load: tip height, state "ready", amounts, limits, focus';

    step(SERVED, async () => {
      const r = await fetch(`${base}/`);
      const html = await r.text();
      assert.equal(r.status, 200, `GET / answered ${r.status}: is server/web mounted? ${html.slice(0, 200)}`);
      assert.match(r.headers.get('content-type') || '', /^text\/html/);
      assert.match(r.headers.get('content-security-policy') || '', /default-src 'none'/);
      assert.match(html, /id="address"/);
      const info = await (await fetch(`${base}/faucet/v1/info`)).json();
      assert.equal(info.challenge?.required, true, `info.challenge: ${JSON.stringify(info.challenge)}`);
      assert.equal(info.challenge?.difficulty, POW_DIFFICULTY);
    });

    step(LOADED, async () => {
      await page.goto(`${base}/`);
      await page.waitForFunction(() => document.getElementById('faucet-state').dataset.state === 'ready', null, { timeout: 15_000 });
      await page.waitForFunction(() => /^\d[\d,]*$/.test(document.getElementById('tip-height').textContent), null, { timeout: 15_000 });
      firstTip = Number((await page.locator('#tip-height').textContent()).replace(/,/g, ''));
      assert.match(await page.locator('#faucet-state').textContent(), /Ready/);
      assert.match(await page.locator('#state-message').textContent(), /\S/);
      assert.match(await page.locator('#default-amount').textContent(), /^\d[\d,]*(\.\d+)? STX$/);
      const limits = await page.locator('#limits li').allTextContents();
      assert.ok(limits.includes('1 drip per address every hour.'), `limits: ${JSON.stringify(limits)}`);
      // Every asset has a budget by default (2,000 drips a day); without
      // sign-in there is no share, no sign-in and nothing by the button.
      assert.equal(await page.locator('#budget-label').textContent(), 'Budget today');
      assert.match(await page.locator('#budget').textContent(), /^\d[\d,]*(\.\d+)? of 1,000,000 STX left$/);
      for (const id of ['share-fact-row', 'account', 'drip-amount', 'budget-note']) {
        assert.equal(await page.locator(`#${id}`).isVisible(), false, `#${id} shows without sign-in or a budget running low`);
      }
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'address', 'the address field has the focus');
      assert.equal(await page.locator('#submit').isDisabled(), true, 'the button starts disabled');
      await page.evaluate(recordPage);
      await shot('page-desktop.png');
      await page.emulateMedia({ colorScheme: 'dark' });
      await shot('page-desktop-dark.png');
      await page.emulateMedia({ colorScheme: 'light' });
    });

    step('the stacking checkbox shows an amount', async () => {
      const amount = await page.locator('#stacking-amount').textContent();
      assert.match(amount, /^\d[\d,]*(\.\d+)? STX$/);
      const box = page.getByRole('checkbox', { name: new RegExp(`stacking amount \\(${amount.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\)`) });
      assert.equal(await box.count(), 1, 'the checkbox is named by its label, amount included');
      assert.equal(await page.getByRole('textbox', { name: 'Your testnet address' }).count(), 1);
      assert.equal(await page.getByRole('button', { name: 'Send testnet STX' }).count(), 1);
    }, { needs: [LOADED] });

    const CHOOSER = 'the asset chooser: a named radio group of the assets info lists, in its order, STX chosen';
    step(CHOOSER, async () => {
      const info = await getInfo(base);
      assert.deepEqual(info.assets.map((a) => a.asset), DEVNET_ASSETS, 'the devnet drips STX, sBTC, tUSD and BTC (its btcd)');
      const group = page.getByRole('group', { name: 'What to request' });
      assert.equal(await group.isVisible(), true, 'no visible chooser');
      const radios = await group.getByRole('radio').evaluateAll((rs) => rs.map((r) => [r.value, r.labels[0].textContent.trim(), r.checked]));
      // One radio per entry, named as info names the asset.
      assert.deepEqual(radios, info.assets.map((a, i) => [a.asset, a.name, i === 0]));
      assert.deepEqual(radios.map((r) => r[1]), ['STX', 'sBTC', 'tUSD', 'BTC']);
      for (const name of ['STX', 'sBTC', 'tUSD', 'BTC']) {
        assert.equal(await page.getByRole('radio', { name, exact: true }).count(), 1, `the ${name} radio is named by its label`);
      }
      assert.equal(await page.locator('h1').textContent(), 'Get testnet STX, sBTC, tUSD or BTC');
      assert.match(await page.locator('.lede').innerText(), /on Stacks; test BTC is paid on a Bitcoin test network \(regtest\)\. They have no value\.$/, 'the lede says what BTC is');
      assert.equal(await page.locator('#size-row').isVisible(), false, 'no sizes for STX');
      assert.match(await page.locator('.lede').innerText(), /; testnet sBTC and tUSD are SIP-010 tokens on Stacks;/, 'the lede says what the tokens are');
      assert.equal(await page.locator('#stacking').isVisible(), true, 'STX chosen: the stacking option shows');
      assert.equal(await page.locator('#token-fact-row').isVisible(), false);
      assert.equal(await page.locator('#api-endpoint').textContent(), 'POST /extended/v3/faucets/stx');
      assert.equal(await page.locator('#address').getAttribute('placeholder'), 'ST…', 'a Stacks placeholder');
    }, { needs: [LOADED] });

    step('a bad address typed character by character: inline message, button disabled, no request', async () => {
      for (const [bad, want] of [[BAD_CHARS, /“!” at position 17/], [TYPO, /typo\?/]]) {
        await typeInto(bad);
        const err = page.locator('#address-error');
        assert.equal(await err.isVisible(), true, `no message for ${bad}`);
        assert.match(await err.textContent(), want);
        assert.equal(await page.locator('#address').getAttribute('aria-invalid'), 'true');
        assert.match(await page.locator('#address').getAttribute('aria-describedby'), /\baddress-error\b/);
        assert.equal(await page.locator('#submit').isDisabled(), true);
        await page.locator('#address').press('Enter');
        await page.waitForTimeout(300);
      }
      const rec = await page.evaluate(() => window.__pagetest);
      assert.deepEqual(rec.enabledWhile, [], 'the button was enabled while typing a bad address');
      assert.deepEqual(extendedRequests().map((r) => r.url), [], 'an invalid address sent a request');
    });

    step('a mainnet address gets the mainnet sentence', async () => {
      await typeInto(MAINNET);
      assert.equal(await page.locator('#address-error').textContent(), MAINNET_MESSAGE);
      assert.equal(await page.locator('#submit').isDisabled(), true);
      await page.locator('#address').press('Enter');
      await page.waitForTimeout(300);
      assert.deepEqual(extendedRequests().map((r) => r.url), []);
    });

    step('keyboard: Tab order and visible focus', async () => {
      await page.locator('#address').focus();
      await page.keyboard.press('Tab');
      const focus = await page.evaluate(() => {
        const el = document.activeElement;
        const cs = getComputedStyle(el);
        return { id: el.id, outline: cs.outlineStyle, width: parseFloat(cs.outlineWidth) };
      });
      assert.equal(focus.id, 'stacking');
      assert.ok(focus.outline !== 'none' && focus.width >= 2, `focus ring: ${JSON.stringify(focus)}`);
    }, { needs: [LOADED] });

    step('a valid address, Enter: proof of work, txid, the status link (a devnet: no public explorer)', async () => {
      address = randomTestnetAddress();
      balanceBefore.stx = await stxBalance(node, address);
      await typeInto(address);
      assert.equal(await page.locator('#address-error').isVisible(), false);
      assert.equal(await page.locator('#submit').isDisabled(), false, 'the button is enabled for a valid address');
      await page.locator('#address').press('Enter');
      await page.waitForFunction(() => /^0x[0-9a-f]{64}$/.test(document.getElementById('txid').textContent), null, { timeout: 30_000 })
        .catch(async (err) => {
          throw new Error(`no txid: ${err.message}; result says ${JSON.stringify(await page.locator('#result').textContent())}`);
        });
      txid = await page.locator('#txid').textContent();

      const rec = await page.evaluate(() => window.__pagetest);
      assert.equal(rec.powShown, true, 'the proof-of-work progress was never shown');
      assert.ok(rec.powTexts.some((t) => /^Checking you are not a bot… \d+%$/.test(t)), `progress texts: ${JSON.stringify(rec.powTexts)}`);
      assert.ok(rec.powTexts.includes('Check complete.'), `progress texts: ${JSON.stringify(rec.powTexts)}`);
      assert.equal(rec.powMax, 1, 'the progress bar did not reach 100%');

      const challenges = requests.filter((r) => r.method === 'POST' && new URL(r.url).pathname === '/faucet/v1/challenge');
      assert.equal(challenges.length, 1, 'one challenge fetched');
      const drips = extendedRequests();
      assert.equal(drips.length, 1, `drip requests: ${JSON.stringify(drips.map((r) => r.url))}`);
      const u = new URL(drips[0].url);
      assert.equal(drips[0].method, 'POST');
      assert.equal(u.pathname, '/extended/v1/faucets/stx');
      assert.equal(u.searchParams.get('address'), address);
      assert.equal(u.searchParams.get('stacking'), 'false');
      assertProof(drips[0].headers);

      // The devnet (its BTC is on regtest) is a chain the public explorer
      // does not know: the link is the faucet's own drip status.
      const link = page.locator('#tx-link');
      assert.equal(await link.isVisible(), true);
      const href = await link.getAttribute('href');
      assert.equal(href, `${base}/faucet/v1/drips/${txid}`, `status link ${href}`);
      assert.equal(await page.locator('#tx-link-text').textContent(), 'Status (JSON)');
      assert.equal(await link.getAttribute('target'), '_blank');
      assert.deepEqual((await link.getAttribute('rel')).split(/\s+/).sort(), ['noopener', 'noreferrer']);
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'result-heading', 'focus moves to the result');
      assert.equal(await page.locator('#result').getAttribute('aria-live'), 'polite');
      assert.match(await page.locator('#message').textContent(), new RegExp(address));
    });

    const recentItem = (p, id) => p.locator(`#recent-list li[data-txid="${id}"]`);

    step('recent drips: the drip is listed, and after a reload (a new tab) still, with its status link; it follows to confirmed', async () => {
      const item = recentItem(page, txid);
      assert.equal(await item.count(), 1, 'the drip is in the recent list');
      assert.equal(await page.locator('#recent').isVisible(), true);
      const p2 = await context.newPage();
      watch(p2, []);
      try {
        await p2.goto(`${base}/`);
        const again = recentItem(p2, txid);
        await again.waitFor({ timeout: 5_000 });
        const text = await again.textContent();
        assert.ok(text.includes(address) && text.includes(txid) && /500 STX/.test(text), `recent item: ${text}`);
        const link = again.locator('a');
        assert.equal(await link.getAttribute('href'), `${base}/faucet/v1/drips/${txid}`);
        assert.equal(await link.getAttribute('target'), '_blank');
        assert.match(await link.textContent(), /^status of the STX drip 0x[0-9a-f]{64} \(opens in a new tab\)$/);
        await p2.waitForFunction((id) => document.querySelector(`#recent-list li[data-txid="${id}"] .recent-state`)?.dataset.state === 'confirmed',
          txid, { timeout: 30_000 }).catch(async (err) => {
          throw new Error(`${err.message}; the item says ${JSON.stringify(await again.textContent())}`);
        });
        assert.match(await again.locator('.recent-state').textContent(), /^Confirmed$/);
      } finally {
        await p2.close();
      }
    });

    step('the transaction is confirmed after the devnode mines; the recipient\'s STX balance rises by the drip', async () => {
      await page.waitForFunction(() => /^Confirmed in block \d+\.$/.test(document.getElementById('tx-state').textContent), null, { timeout: 30_000 })
        .catch(async (err) => {
          throw new Error(`${err.message}; tx-state says ${JSON.stringify(await page.locator('#tx-state').textContent())}`);
        });
      const polls = requests.filter((r) => new URL(r.url).pathname === `/faucet/v1/drips/${txid}`);
      assert.ok(polls.length >= 1, 'the page never polled the drip status');
      const stx = (await getInfo(base)).assets.find((a) => a.asset === 'stx');
      assert.equal(await stxBalance(node, address) - balanceBefore.stx, BigInt(stx.amount), 'GET /v2/accounts: the balance rose by the drip');
    });

    step('360 px wide after the drip: no horizontal scroll, names, contrast; screenshots', async () => {
      await layoutChecks('', '#result', async (scheme) => {
        const suffix = scheme === 'dark' ? '-dark' : '';
        await shot(`page-360${suffix}.png`);
        await shot(`page-360-full${suffix}.png`, true);
      });
      await shot('page-desktop-result.png', true);
    });

    step('the same address again: 429 with the wait, counting down, button disabled', async () => {
      await page.locator('#address').focus();
      await page.locator('#address').press('Enter');
      // With a choice of assets the sentence names the asset: limits are per asset.
      const first = await waitText(page, 'message', /^Too many STX requests for this address\. Try again in (\d+ h( \d+ min)?|\d+ min( \d+ s)?|\d+ s)\.$/, 20_000);
      assert.match(first, /Try again in 59 min|Try again in 1 h/, 'about an hour, as --limit-address 1/1h');
      assert.equal(await page.locator('#submit').isDisabled(), true, 'the button stays disabled during the wait');
      await page.waitForTimeout(2100);
      const later = await page.locator('#message').textContent();
      assert.notEqual(later, first, 'the countdown does not move');
      assert.equal(await page.locator('#submit').isDisabled(), true);
      const item = recentItem(page, txid);
      assert.equal(await item.count(), 1, 'the 429 keeps the last txid in the recent drips');
      assert.equal(await item.locator('.recent-state').textContent(), 'Confirmed');
      await shot('page-desktop-429.png', true);
    });

    const SBTC_CHOSEN = 'keyboard: Shift+Tab to the chooser, arrow to sBTC: its amount, limits, state and token; no stacking';
    step(SBTC_CHOSEN, async () => {
      sbtc = (await getInfo(base)).assets.find((a) => a.asset === 'sbtc');
      const stxLimits = await page.locator('#limits li').allTextContents();
      await page.locator('#address').focus();
      await page.keyboard.press('Shift+Tab');
      const ring = await focusRing(page);
      assert.deepEqual([ring.id, ring.checked], ['asset-stx', true], 'Shift+Tab from the address reaches the chosen radio');
      assert.ok(ring.outline !== 'none' && ring.width >= 2, `focus ring on the segment: ${JSON.stringify(ring)}`);
      await page.keyboard.press('ArrowRight');
      assert.deepEqual(await focusRing(page).then((r) => [r.id, r.checked]), ['asset-sbtc', true], 'the arrow key chooses sBTC');

      assert.equal(await page.locator('#default-amount').textContent(), '0.001 sBTC', 'the devnet drips 100000 sats');
      const limits = await page.locator('#limits li').allTextContents();
      assert.deepEqual(sbtc.limits.address, { requests: 1, window_seconds: 3600 }, 'as --sbtc-limit-address 1/1h');
      assert.ok(limits.includes('1 drip per address every hour.'), `sBTC limits: ${JSON.stringify(limits)}`);
      assert.equal(limits.length, Object.values(sbtc.limits).filter(Boolean).length, `sBTC limits: ${JSON.stringify(limits)}`);
      assert.ok(!limits.some((l) => /stacking/.test(l)), 'sBTC has no stacking limit');
      assert.notDeepEqual(limits, stxLimits, 'the limits follow the asset');
      assert.equal(await page.locator('#faucet-state').getAttribute('data-state'), sbtc.state);
      assert.equal(await page.locator('#state-message').textContent(), sbtc.state_message);
      assert.equal(await page.locator('#token-id').textContent(), sbtc.asset_identifier);
      assert.equal(await page.locator('#stacking').isVisible(), false, 'no stacking option for sBTC');
      assert.equal(await page.locator('#stacking-amount-fact').isVisible(), false);
      assert.equal(await page.locator('#form-heading').textContent(), 'Request sBTC');
      assert.equal(await page.getByRole('button', { name: 'Send testnet sBTC' }).count(), 1);
      assert.equal(await page.locator('#api-endpoint').textContent(), 'POST /extended/v3/faucets/sbtc');
      // The address waits an hour for STX, but sBTC has its own limit.
      assert.equal(await page.locator('#submit').isDisabled(), false, 'the STX wait holds sBTC back');
      await page.evaluate(() => window.scrollTo(0, 0));
      await shot('page-desktop-sbtc.png');
    });

    step('keyboard-only sBTC drip: Tab, Enter: proof of work, the sBTC endpoint, txid', async () => {
      balanceBefore.sbtc = await tokenBalance(node, sbtc.asset_identifier, address);
      const { txid: got, drip } = await keyboardDrip('sBTC', txid);
      sbtcTxid = got;
      const u = new URL(drip.url);
      assert.equal(drip.method, 'POST');
      assert.equal(u.pathname, '/extended/v1/faucets/sbtc');
      assert.equal(u.searchParams.get('address'), address);
      assert.equal(u.searchParams.has('stacking'), false, 'no stacking parameter for sBTC');
      assertProof(drip.headers);

      assert.equal(await page.locator('#result-heading').textContent(), 'sBTC on the way');
      assert.equal(await page.locator('#message').textContent(),
        `The faucet sent 0.001 sBTC to ${address}. It arrives when the transaction is in a block.`);
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'result-heading', 'focus moves to the result');
      const d = await (await fetch(`${base}/faucet/v1/drips/${sbtcTxid}`)).json();
      assert.deepEqual([d.asset, d.amount, d.amount_ustx], ['sbtc', String(sbtc.amount), null], `drip status: ${JSON.stringify(d)}`);
    });

    step('the sBTC transfer is confirmed after the devnode mines; the recipient\'s get-balance rises by the drip', async () => {
      await waitText(page, 'tx-state', /^Confirmed in block \d+\.$/);
      const polls = requests.filter((r) => new URL(r.url).pathname === `/faucet/v1/drips/${sbtcTxid}`);
      assert.ok(polls.length >= 1, 'the page never polled the sBTC drip status');
      assert.equal(await tokenBalance(node, sbtc.asset_identifier, address) - balanceBefore.sbtc, BigInt(sbtc.amount), 'call-read get-balance');
    });

    step('sBTC chosen, 360 px and desktop: no horizontal scroll, names, contrast; screenshot', async () => {
      await layoutChecks(', sBTC', '#asset-choice', async (scheme) => {
        if (scheme === 'light') await shot('page-360-sbtc.png');
      });
    });

    step('the same address for sBTC again: its own 429; back to STX by keyboard, whose wait still holds', async () => {
      await page.locator('#address').focus();
      await page.keyboard.press('Enter');
      const wait = await waitText(page, 'message', /^Too many sBTC requests for this address\. Try again in (\d+ h( \d+ min)?|\d+ min( \d+ s)?|\d+ s)\.$/, 20_000);
      assert.match(wait, /Try again in 59 min|Try again in 1 h/, 'about an hour, as --sbtc-limit-address 1/1h');
      assert.equal(await page.locator('#submit').isDisabled(), true, 'the button stays disabled during the wait');
      await page.locator('#address').focus();
      await page.keyboard.press('Shift+Tab');
      await page.keyboard.press('ArrowLeft');
      assert.deepEqual(await focusRing(page).then((r) => [r.id, r.checked]), ['asset-stx', true]);
      assert.match(await page.locator('#default-amount').textContent(), /^\d[\d,]*(\.\d+)? STX$/);
      assert.equal(await page.locator('#stacking').isVisible(), true, 'the stacking option is back');
      assert.equal(await page.locator('#submit').isDisabled(), true, 'the STX wait still holds');
    });

    // tUSD: a token the page knows nothing of but what info says (its name,
    // 6 decimals, its contract, limits and endpoints).
    const TUSD_CHOSEN = 'keyboard: arrows to tUSD: its amount by its 6 decimals, limits, state, balance and contract; no stacking';
    step(TUSD_CHOSEN, async () => {
      tusd = (await getInfo(base)).assets.find((a) => a.asset === 'tusd');
      assert.deepEqual([tusd.name, tusd.decimals, String(tusd.amount), tusd.asset_source], ['tUSD', 6, '10000000', 'configured'], JSON.stringify(tusd));
      await page.locator('#address').focus();
      await page.keyboard.press('Shift+Tab');
      assert.deepEqual(await focusRing(page).then((r) => [r.id, r.checked]), ['asset-stx', true]);
      await page.keyboard.press('ArrowRight');
      await page.keyboard.press('ArrowRight');
      assert.deepEqual(await focusRing(page).then((r) => [r.id, r.checked]), ['asset-tusd', true], 'the arrow keys choose tUSD');
      assert.equal(await page.locator('#default-amount').textContent(), '10 tUSD', '10000000 base units, 6 decimals');
      assert.equal(await page.locator('#faucet-state').getAttribute('data-state'), tusd.state);
      assert.equal(await page.locator('#state-message').textContent(), tusd.state_message);
      assert.equal(await page.locator('#token-id').textContent(), tusd.asset_identifier);
      assert.match(await page.locator('#balance').textContent(), /^\d[\d,]*(\.\d+)? tUSD \(\d[\d,]* drips? left\)$/);
      const limits = await page.locator('#limits li').allTextContents();
      assert.equal(limits.length, Object.values(tusd.limits).filter(Boolean).length, `tUSD limits: ${JSON.stringify(limits)}`);
      assert.ok(limits.includes('5 drips per address every 5 minutes.'), `tUSD limits (the default): ${JSON.stringify(limits)}`);
      assert.equal(await page.locator('#stacking').isVisible(), false, 'no stacking option for tUSD');
      assert.equal(await page.locator('#size-row').isVisible(), false, 'no sizes for tUSD');
      assert.equal(await page.locator('#form-heading').textContent(), 'Request tUSD');
      assert.equal(await page.getByRole('button', { name: 'Send testnet tUSD' }).count(), 1);
      assert.equal(await page.locator('#api-endpoint').textContent(), `POST ${tusd.endpoints.v3}`);
      assert.equal(await page.getByRole('textbox', { name: 'Your testnet address' }).count(), 1, 'a Stacks address field');
      // The address waits for STX and sBTC; tUSD has its own limit.
      assert.equal(await page.locator('#submit').isDisabled(), false, 'the STX and sBTC waits hold tUSD back');
    });

    step('keyboard-only tUSD drip: Tab, Enter: proof of work, its v1 endpoint from info, txid, "10 tUSD"', async () => {
      balanceBefore.tusd = await tokenBalance(node, tusd.asset_identifier, address);
      const { txid: got, drip } = await keyboardDrip('tUSD', sbtcTxid);
      tusdTxid = got;
      const u = new URL(drip.url);
      assert.deepEqual([drip.method, u.pathname, u.searchParams.get('address'), u.searchParams.has('stacking')],
        ['POST', tusd.endpoints.v1, address, false]);
      assertProof(drip.headers);
      assert.equal(await page.locator('#result-heading').textContent(), 'tUSD on the way');
      assert.equal(await page.locator('#message').textContent(),
        `The faucet sent 10 tUSD to ${address}. It arrives when the transaction is in a block.`);
      assert.equal(await page.locator('#tx-link').getAttribute('href'), `${base}/faucet/v1/drips/${tusdTxid}`);
      const d = await (await fetch(`${base}/faucet/v1/drips/${tusdTxid}`)).json();
      assert.deepEqual([d.asset, d.recipient, d.amount, d.amount_ustx], ['tusd', address, '10000000', null], `drip status: ${JSON.stringify(d)}`);
    });

    step('the tUSD transfer is confirmed; the recipient\'s get-balance rises by 10 tUSD; it is in the recent drips', async () => {
      await waitText(page, 'tx-state', /^Confirmed in block \d+\.$/);
      assert.equal((await (await fetch(`${base}/faucet/v1/drips/${tusdTxid}`)).json()).state, 'confirmed');
      assert.equal(await tokenBalance(node, tusd.asset_identifier, address) - balanceBefore.tusd, 10_000_000n, 'call-read get-balance');
      const item = recentItem(page, tusdTxid);
      assert.match(await item.textContent(), /^10 tUSD · /);
      await page.waitForFunction((id) => document.querySelector(`#recent-list li[data-txid="${id}"] .recent-state`)?.dataset.state === 'confirmed',
        tusdTxid, { timeout: 10_000 });
    });

    /** waitBTCReady waits until info's BTC entry has funds: the devnet's btcd mined its coins. */
    const waitBTCReady = async (b) => {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const entry = (await getInfo(b)).assets.find((a) => a.asset === 'btc');
        if (entry?.state === 'ready' && entry.funding) return entry;
        if (Date.now() > deadline) throw new Error(`the BTC faucet is not ready: ${JSON.stringify(entry)}`);
        await sleep(500);
      }
    };

    const BTC_CHOSEN = 'keyboard: arrows to BTC: its amount in BTC, limits, a regtest address field, sizes; no stacking, token or chain tip';
    step(BTC_CHOSEN, async () => {
      btc = await waitBTCReady(base);
      assert.deepEqual([btc.network, btc.decimals, btc.amount], ['regtest', 8, 10000], JSON.stringify(btc));
      await page.locator('#address').focus();
      await page.keyboard.press('Shift+Tab');
      assert.deepEqual(await focusRing(page).then((r) => [r.id, r.checked]), ['asset-tusd', true]);
      await page.keyboard.press('ArrowRight');
      assert.deepEqual(await focusRing(page).then((r) => [r.id, r.checked]), ['asset-btc', true], 'the arrow keys choose BTC');
      await waitReadyState(page);
      assert.equal(await page.locator('#state-message').textContent(), btc.state_message);
      assert.equal(await page.locator('#default-amount').textContent(), '0.0001 BTC', '10000 sats');
      const limits = await page.locator('#limits li').allTextContents();
      assert.deepEqual(btc.limits.address, { requests: 1, window_seconds: 3600 }, 'as --btc-limit-address 1/1h');
      assert.ok(limits.includes('1 drip per address every hour.'), `BTC limits: ${JSON.stringify(limits)}`);
      assert.ok(!limits.some((l) => /stacking|holding/.test(l)), `BTC limits: ${JSON.stringify(limits)}`);
      assert.equal(await page.locator('#stacking').isVisible(), false, 'no stacking option for BTC');
      assert.equal(await page.locator('#token-fact-row').isVisible(), false, 'BTC has no token contract');
      assert.equal(await page.locator('#tip-fact-row').isVisible(), false, 'the Stacks chain tip says nothing of BTC');
      assert.equal(await page.locator('#form-heading').textContent(), 'Request BTC');
      assert.equal(await page.getByRole('button', { name: 'Send testnet BTC' }).count(), 1);
      assert.equal(await page.getByRole('textbox', { name: 'Your Bitcoin regtest address' }).count(), 1, 'the field names the network');
      assert.equal(await page.locator('#address-hint').textContent(),
        'It starts with bcrt1, tb1, m, n or 2. This faucet pays regtest BTC, not mainnet BTC.');
      assert.equal(await page.locator('#api-endpoint').textContent(), 'POST /extended/v3/faucets/btc');
      assert.equal(await page.locator('#api-body').textContent(), '{"address":"bcrt1…"}');
      assert.equal(await page.locator('#address').getAttribute('placeholder'), 'bcrt1…', 'a regtest placeholder');
      // The sizes: a named radio group, the usual drip chosen.
      const sizes = page.getByRole('group', { name: 'How much' });
      assert.equal(await sizes.isVisible(), true, 'no size choice');
      const radios = await sizes.getByRole('radio').evaluateAll((rs) => rs.map((r) => [r.value, r.labels[0].textContent.trim(), r.checked]));
      assert.deepEqual(radios, [['default', '0.0001 BTC (the usual drip)', true], ['large', '0.01 BTC (large)', false],
        ['xlarge', '0.5 BTC (extra large)', false]], 'the sizes from info.sizes, in BTC');
      // The Stacks address still in the field is checked again as a Bitcoin one.
      assert.equal(await page.locator('#address').inputValue(), address);
      assert.match(await page.locator('#address-error').textContent(), /^This is a Stacks address; for BTC enter a Bitcoin regtest address/);
      assert.equal(await page.locator('#submit').isDisabled(), true, 'a Stacks address for BTC');
      await page.evaluate(() => window.scrollTo(0, 0));
      await shot('page-desktop-btc.png');
    });

    step('BTC: a mainnet address gets the sentence that the faucet pays test BTC; no request', async () => {
      const from = extendedRequests().length;
      await typeInto(BTC_MAINNET);
      assert.equal(await page.locator('#address-error').textContent(), btcMainnetMessage('regtest'));
      assert.match(await page.locator('#address-error').textContent(), /mainnet address; this faucet pays regtest BTC, which has no value/);
      assert.equal(await page.locator('#address').getAttribute('aria-invalid'), 'true');
      assert.equal(await page.locator('#submit').isDisabled(), true);
      await page.locator('#address').press('Enter');
      await page.waitForTimeout(300);
      assert.deepEqual(extendedRequests().slice(from).map((r) => r.url), [], 'a mainnet address sent a request');
      // The server is the judge: it refuses the address too.
      const r = await fetch(`${base}/extended/v3/faucets/btc`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ address: BTC_MAINNET }),
      });
      assert.equal(r.status, 400);
      assert.match((await r.json()).error, /is a mainnet address; this faucet sends regtest BTC/);
    });

    step('keyboard-only BTC drip to a fresh regtest address: proof of work, the v3 endpoint, a 64-hex txid, no explorer link', async () => {
      btcAddress = randomRegtestAddress();
      balanceBefore.btc = await btcBalance(btcAddress);
      await typeInto(btcAddress);
      assert.equal(await page.locator('#address-error').isVisible(), false, await page.locator('#address-error').textContent());
      assert.equal(await page.locator('#submit').isDisabled(), false, 'the button is enabled for a regtest address');
      const from = extendedRequests().length;
      await page.locator('#address').press('Enter');
      await page.waitForFunction(() => !document.getElementById('tx').hidden && /^[0-9a-f]{64}$/.test(document.getElementById('txid').textContent),
        null, { timeout: 30_000 }).catch(async (err) => {
        throw new Error(`no BTC txid: ${err.message}; result says ${JSON.stringify(await page.locator('#result').textContent())}`);
      });
      btcTxid = await page.locator('#txid').textContent();

      const drips = extendedRequests().slice(from);
      assert.equal(drips.length, 1, `drip requests: ${JSON.stringify(drips.map((r) => r.url))}`);
      const u = new URL(drips[0].url);
      assert.equal(drips[0].method, 'POST');
      assert.deepEqual([u.pathname, u.search], ['/extended/v3/faucets/btc', ''], 'the default drip is v3, the address in the body');
      assert.deepEqual(JSON.parse(drips[0].body), { address: btcAddress });
      assert.match(drips[0].headers['content-type'] || '', /^application\/json/);
      assertProof(drips[0].headers);

      assert.equal(await page.locator('#result-heading').textContent(), 'BTC on the way');
      assert.equal(await page.locator('#message').textContent(),
        `The faucet sent 0.0001 BTC to ${btcAddress}. It arrives when the transaction is in a block.`);
      assert.equal(await page.locator('#tx-link').getAttribute('href'), `${base}/faucet/v1/drips/${btcTxid}`, 'regtest has no explorer: the status link');
      assert.match(await page.locator('#tx-state').textContent(), /^(Pending — waiting for the next Bitcoin block…|Confirmed in block \d+\.|Confirmed \((1 confirmation|([2-9]|[1-9]\d+) confirmations)\)\.)$/);
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'result-heading', 'focus moves to the result');
      const d = await (await fetch(`${base}/faucet/v1/drips/${btcTxid}`)).json();
      assert.deepEqual([d.asset, d.recipient, d.amount], ['btc', btcAddress, '10000'], `drip status: ${JSON.stringify(d)}`);
    });

    step('the BTC payout is confirmed after the devnet\'s btcd mines; the address holds 0.0001 BTC more', async () => {
      // The drip's status has the block height; only a payout too deep for
      // the faucet's view of the chain says its confirmations instead.
      await waitText(page, 'tx-state', /^Confirmed in block \d+\.$/);
      const polls = requests.filter((r) => new URL(r.url).pathname === `/faucet/v1/drips/${btcTxid}`);
      assert.ok(polls.length >= 1, 'the page never polled the BTC drip status');
      assert.equal((await (await fetch(`${base}/faucet/v1/drips/${btcTxid}`)).json()).state, 'confirmed');
      // Its confirmed balance, as btcd's address index answers it through
      // the faucet: the index may trail the block by a moment.
      let got = 0n;
      for (const deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(500)) {
        got = await btcBalance(btcAddress) - balanceBefore.btc;
        if (got !== 0n) break;
      }
      assert.equal(got, BigInt(btc.amount), 'GET /extended/v1/faucets/btc/{address}');
    });

    step('BTC chosen, 360 px and desktop: no horizontal scroll, names, contrast; screenshots', async () => {
      await layoutChecks(', BTC', '#form-heading', async (scheme) => {
        if (scheme === 'light') await shot('page-360-btc.png');
      });
      await page.emulateMedia({ colorScheme: 'dark' });
      await shot('page-desktop-btc-result-dark.png', true);
      await page.emulateMedia({ colorScheme: 'light' });
      await shot('page-desktop-btc-result.png', true);
    });

    step('the same address for BTC again: its own 429 from v3\'s Retry-After', async () => {
      await page.locator('#address').focus();
      await page.keyboard.press('Enter');
      const wait = await waitText(page, 'message', /^Too many BTC requests for this address\. Try again in (\d+ h( \d+ min)?|\d+ min( \d+ s)?|\d+ s)\.$/, 20_000);
      assert.match(wait, /Try again in 59 min|Try again in 1 h/, 'about an hour, as --btc-limit-address 1/1h');
      assert.equal(await page.locator('#submit').isDisabled(), true, 'the button stays disabled during the wait');
    });

    step('a large BTC drip by keyboard: Tab to the sizes, arrow to large: the v1 endpoint with large=true', async () => {
      const to = randomRegtestAddress();
      await typeInto(to);
      await page.keyboard.press('Tab');
      assert.deepEqual(await page.evaluate(() => [document.activeElement?.id, document.activeElement?.checked]), ['size-default', true],
        'Tab from the address reaches the chosen size');
      await page.keyboard.press('ArrowDown');
      assert.deepEqual(await page.evaluate(() => [document.activeElement?.id, document.activeElement?.checked]), ['size-large', true]);
      const ring = await page.evaluate(() => {
        const cs = getComputedStyle(document.activeElement);
        return { outline: cs.outlineStyle, width: parseFloat(cs.outlineWidth) };
      });
      assert.ok(ring.outline !== 'none' && ring.width >= 2, `focus ring on the size: ${JSON.stringify(ring)}`);
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'submit', 'then the button');
      const from = extendedRequests().length;
      await page.keyboard.press('Enter');
      await page.waitForFunction((old) => {
        const t = document.getElementById('txid').textContent;
        return !document.getElementById('tx').hidden && t !== old && /^[0-9a-f]{64}$/.test(t);
      }, btcTxid, { timeout: 30_000 }).catch(async (err) => {
        throw new Error(`no large BTC txid: ${err.message}; result says ${JSON.stringify(await page.locator('#result').textContent())}`);
      });
      const largeTxid = await page.locator('#txid').textContent();
      const drips = extendedRequests().slice(from);
      assert.equal(drips.length, 1, `drip requests: ${JSON.stringify(drips.map((r) => r.url))}`);
      const u = new URL(drips[0].url);
      assert.deepEqual([drips[0].method, u.pathname, u.searchParams.get('address'), u.searchParams.get('large'), u.searchParams.has('xlarge')],
        ['POST', '/extended/v1/faucets/btc', to, 'true', false]);
      assertProof(drips[0].headers);
      assert.equal(await page.locator('#message').textContent(),
        `The faucet sent 0.01 BTC to ${to}. It arrives when the transaction is in a block.`);
      const d = await (await fetch(`${base}/faucet/v1/drips/0x${largeTxid}`)).json();
      assert.deepEqual([d.asset, d.recipient, d.amount], ['btc', to, String(btc.sizes.large)], `drip status: ${JSON.stringify(d)}`);
      // The drip's status has the block height; only a payout too deep for
      // the faucet's view of the chain says its confirmations instead.
      await waitText(page, 'tx-state', /^Confirmed in block \d+\.$/);
    });

    step('back to STX by keyboard: the Stacks field, stacking and chain tip again, no sizes', async () => {
      assert.equal(await page.locator('#size-large').isChecked(), true, 'large stays chosen, hidden: STX ignores it');
      await page.locator('#address').focus();
      await page.keyboard.press('Shift+Tab');
      assert.deepEqual(await focusRing(page).then((r) => [r.id, r.checked]), ['asset-btc', true]);
      await page.keyboard.press('ArrowRight'); // wraps round to the first
      assert.deepEqual(await focusRing(page).then((r) => [r.id, r.checked]), ['asset-stx', true]);
      assert.equal(await page.getByRole('textbox', { name: 'Your testnet address' }).count(), 1);
      assert.equal(await page.locator('#address-hint').textContent(), 'It starts with ST. A contract principal (ST….contract-name) works too.');
      assert.equal(await page.locator('#size-row').isVisible(), false);
      assert.equal(await page.locator('#stacking').isVisible(), true);
      assert.equal(await page.locator('#tip-fact-row').isVisible(), true);
      assert.equal(await page.locator('#api-body').textContent(), '{"address":"ST…"}');
      assert.equal(await page.locator('#address').getAttribute('placeholder'), 'ST…');
      assert.match(await page.locator('#address-error').textContent(), /^A Stacks address starts with S/, 'the regtest address is checked as a Stacks one');
      await typeInto(address);
      assert.equal(await page.locator('#submit').isDisabled(), true, 'the STX wait still holds');
    });

    step('the faucet\'s balance and budget for each asset, in its units, as info says', async () => {
      const p2 = await context.newPage();
      watch(p2, []);
      try {
        await p2.goto(`${base}/`);
        await waitReadyState(p2);
        for (const name of (await getInfo(base)).assets.map((a) => a.name)) {
          await p2.getByRole('radio', { name, exact: true }).check();
          // Read info after the page: the balance moves with each drip and block.
          await p2.waitForFunction((n) => document.getElementById('balance').textContent.includes(` ${n} (`), name, { timeout: 15_000 });
          const shown = await p2.locator('#balance').textContent();
          const a = (await getInfo(base)).assets.find((x) => x.name === name);
          assert.ok(Number.isSafeInteger(a.funding?.balance), `${name} funding: ${JSON.stringify(a.funding)}`);
          const m = new RegExp(`^(\\d[\\d,]*(\\.\\d+)? ${name}) \\((\\d[\\d,]*) drips? left\\)$`).exec(shown);
          assert.ok(m, `#balance for ${name}: ${shown}`);
          assert.notEqual(m[1], `0 ${name}`, `${name} balance: ${shown}`);
          assert.ok(await p2.locator('#balance-fact-row').isVisible());
          // The Stacks assets hold still between drips: the page shows
          // info's balance (it reads info every 10 s). BTC's grows as
          // coinbases mature.
          if (name !== 'BTC') {
            const want = formatAmount((await getInfo(base)).assets.find((x) => x.name === name).funding.balance, a.decimals, name);
            await waitText(p2, 'balance', new RegExp(`^${escapeRe(want)} \\(`), 15_000);
          }
          // Its budget, the default 2,000 drips a day, and what is left of it after the drips above.
          assert.equal(a.budget?.period_seconds, 86400, `${name} budget: ${JSON.stringify(a.budget)}`);
          assert.equal(await p2.locator('#budget-label').textContent(), 'Budget today');
          await waitText(p2, 'budget', new RegExp(`^${escapeRe(formatLeft(a.budget.left, a.budget.amount, a.decimals, name))}$`), 15_000);
        }
        await shot('page-desktop-balance-btc.png', false, p2);
      } finally {
        await p2.close();
      }
    }, { needs: [SERVED] });

    step('390×844 phone: the address field and the button above the fold; the recent drips after the form', async () => {
      const p2 = await context.newPage();
      watch(p2, []);
      try {
        await p2.setViewportSize({ width: 390, height: 844 });
        await p2.goto(`${base}/`);
        await waitReadyState(p2);
        for (const scheme of ['light', 'dark']) {
          await p2.emulateMedia({ colorScheme: scheme });
          for (const id of ['address', 'submit']) {
            const box = await p2.locator(`#${id}`).boundingBox();
            assert.ok(box && box.y >= 0 && box.y + box.height <= 844, `#${id} at ${JSON.stringify(box)}: below the fold`);
          }
          assert.ok(await p2.evaluate(() => document.documentElement.scrollWidth <= 390), 'scrollWidth > 390');
          assert.deepEqual(await p2.evaluate(a11ySmoke), [], `accessibility smoke (${scheme}, 390 px)`);
          assert.deepEqual(await p2.evaluate(contrastProblems), [], `contrast (${scheme}, 390 px)`);
          await shot(`page-390${scheme === 'dark' ? '-dark' : ''}.png`, false, p2);
        }
        await p2.emulateMedia({ colorScheme: 'light' });
        await shot('page-390-full.png', true, p2);
        const form = await p2.locator('#drip-form').boundingBox();
        const recent = await p2.locator('#recent').boundingBox();
        assert.ok(recent && recent.y > form.y, 'the recent drips come after the form');
      } finally {
        await p2.close();
      }
    }, { needs: [SERVED] });

    step('recent drips: "Clear" by keyboard empties the list, and it stays empty after a reload', async () => {
      const p2 = await context.newPage();
      watch(p2, []);
      try {
        await p2.goto(`${base}/`);
        await waitReadyState(p2);
        const n = await p2.locator('#recent-list li').count();
        assert.ok(n >= 4, `recent drips of STX, sBTC, tUSD and BTC: ${n}`);
        const ids = await p2.locator('#recent-list li').evaluateAll((els) => els.map((e) => e.dataset.txid));
        assert.ok([txid, sbtcTxid, tusdTxid, btcTxid].every((id) => ids.includes(id)), `recent txids ${JSON.stringify(ids)}`);
        assert.ok(await p2.locator('#recent-list li', { hasText: ' sBTC' }).count() >= 1, 'an sBTC drip is listed');
        await p2.locator('#recent-clear').focus();
        await p2.keyboard.press('Enter');
        assert.equal(await p2.locator('#recent').isVisible(), false);
        assert.equal(await p2.locator('#recent-status').textContent(), 'Recent drips cleared.');
        await p2.reload();
        await waitReadyState(p2);
        assert.equal(await p2.locator('#recent-list li').count(), 0);
        assert.equal(await p2.locator('#recent').isVisible(), false);
      } finally {
        await p2.close();
      }
    });

    step('live facts: the tip height follows the chain', async () => {
      // The page reads /faucet/v1/info every 10 s; blocks come every 3 s.
      await page.waitForFunction((h) => Number(document.getElementById('tip-height').textContent.replace(/,/g, '')) > h,
        firstTip, { timeout: 25_000 });
    });

    step('server unreachable, then a network failure on the drip', async () => {
      const p2 = await context.newPage();
      try {
        await p2.route('**/faucet/v1/info', (r) => r.abort());
        await p2.goto(`${base}/`);
        await p2.waitForFunction(() => document.getElementById('faucet-state').dataset.state === 'unreachable', null, { timeout: 10_000 });
        assert.match(await p2.locator('#state-message').textContent(), /^The faucet server is unreachable/);
        await p2.unroute('**/faucet/v1/info');
        await p2.route('**/extended/v1/faucets/stx*', (r) => r.abort());
        await p2.waitForFunction(() => document.getElementById('faucet-state').dataset.state === 'ready', null, { timeout: 15_000 });
        await p2.locator('#address').pressSequentially(randomTestnetAddress(), { delay: 2 });
        await p2.waitForTimeout(300);
        await p2.locator('#address').press('Enter');
        await p2.waitForFunction(() => document.getElementById('message').textContent !== '', null, { timeout: 15_000 });
        assert.equal(await p2.locator('#message').textContent(), 'Could not reach the faucet. Check your connection and try again.');
        assert.equal(await p2.locator('#submit').isDisabled(), false, 'the button is usable again');
      } finally {
        await p2.close();
      }
    }, { needs: [SERVED] });

    // --devnet always turns sBTC on, so a faucet with sBTC off is a plain
    // `faucet serve` on a node of its own (`faucet devnet`) with one key.
    const STX_ONLY = 'sBTC off: no chooser, the page as before; an STX drip and its 429 without an asset name';
    step(STX_ONLY, async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'pagetest-'));
      try {
        const { stdout } = await promisify(execFile)(opts.faucet, ['keys', 'generate', '-n', '1']);
        const keyFile = path.join(dir, 'key');
        await writeFile(keyFile, stdout.trim().split(/\s+/)[0] + '\n', { mode: 0o600 });
        const node = await launch((port) => ['devnet', '--listen', `127.0.0.1:${port}`, '--block-time', '3s',
          '--log-format', 'text', '--fund-key-file', keyFile], '/v2/info');
        stxOnly = {
          node,
          faucet: await launch((port) => ['serve', '--node-url', node.base, '--key-file', keyFile, '--store', 'memory',
            '--listen', `127.0.0.1:${port}`, '--log-format', 'text', '--pow-difficulty', String(POW_DIFFICULTY), '--limit-address', '1/1h']),
        };
      } finally {
        await rm(dir, { recursive: true, force: true }); // read at start-up
      }
      const info = await getInfo(stxOnly.faucet.base);
      assert.deepEqual(info.assets.map((a) => a.asset), ['stx'], 'sBTC is off');

      const p = await context.newPage();
      const reqs = [];
      watch(p, reqs);
      try {
        await p.goto(`${stxOnly.faucet.base}/`);
        await waitReadyState(p);
        await p.waitForFunction(() => /^\d[\d,]*$/.test(document.getElementById('tip-height').textContent), null, { timeout: 15_000 });
        assert.equal(await p.locator('#asset-choice').isVisible(), false, 'a chooser with one asset');
        assert.equal(await p.getByRole('radio').count(), 0);
        assert.equal(await p.locator('h1').textContent(), 'Get testnet STX');
        assert.doesNotMatch(await p.locator('.lede').innerText(), /sBTC/, 'an STX-only page never mentions sBTC');
        assert.equal(await p.locator('#form-heading').textContent(), 'Request STX');
        assert.equal(await p.getByRole('button', { name: 'Send testnet STX' }).count(), 1);
        assert.match(await p.locator('#default-amount').textContent(), /^\d[\d,]*(\.\d+)? STX$/);
        assert.match(await p.locator('#stacking-amount-fact').textContent(), /^\d[\d,]*(\.\d+)? STX$/);
        assert.equal(await p.locator('#stacking').isVisible(), true);
        assert.equal(await p.locator('#token-fact-row').isVisible(), false);
        assert.equal(await p.locator('#api-endpoint').textContent(), 'POST /extended/v3/faucets/stx');
        assert.ok((await p.locator('#limits li').allTextContents()).includes('1 drip per address every hour.'));
        assert.equal(await p.evaluate(() => document.activeElement?.id), 'address');
        // Taken before anything moves the focus: comparable with an older page-desktop.png.
        await shot('page-desktop-stx-only.png', false, p);
        await p.keyboard.press('Tab');
        assert.equal(await p.evaluate(() => document.activeElement?.id), 'stacking', 'Tab order as before');
        await p.keyboard.press('Shift+Tab');
        await p.keyboard.press('Shift+Tab');
        assert.equal(await p.evaluate(() => document.activeElement?.tagName), 'BODY', 'nothing to focus before the address');
        assert.deepEqual(await p.evaluate(a11ySmoke), []);
        assert.deepEqual(await p.evaluate(contrastProblems), []);

        const to = randomTestnetAddress();
        await typeInto(to, p);
        await p.locator('#address').press('Enter');
        await waitText(p, 'txid', /^0x[0-9a-f]{64}$/);
        const drips = extendedRequests(reqs);
        assert.equal(drips.length, 1);
        const u = new URL(drips[0].url);
        assert.deepEqual([u.pathname, u.searchParams.get('address'), u.searchParams.get('stacking')], ['/extended/v1/faucets/stx', to, 'false']);
        assertProof(drips[0].headers);
        assert.equal(await p.locator('#result-heading').textContent(), 'STX on the way');
        await p.locator('#address').press('Enter');
        await waitText(p, 'message', /^Too many requests for this address\. Try again in (\d+ h( \d+ min)?|\d+ min( \d+ s)?|\d+ s)\.$/, 20_000);
      } finally {
        await p.close();
      }
    }, { needs: [] });

    step('a page still offering sBTC after it was turned off: the server\'s 403, then no choice', async () => {
      // As if the page read /faucet/v1/info while sBTC was still on: the
      // main faucet's real sBTC entry, until the drip is sent.
      const real = (await getInfo(base)).assets.find((a) => a.asset === 'sbtc');
      let stale = true;
      const p = await context.newPage();
      watch(p, []);
      try {
        await p.route('**/faucet/v1/info', async (route) => {
          const response = await route.fetch();
          const json = await response.json();
          if (stale) json.assets.push(real);
          await route.fulfill({ response, json });
        });
        await p.goto(`${stxOnly.faucet.base}/`);
        await waitReadyState(p);
        await p.getByRole('group', { name: 'What to request' }).waitFor();
        await p.keyboard.press('Shift+Tab');
        await p.keyboard.press('ArrowRight');
        await p.keyboard.press('Tab');
        await typeInto(randomTestnetAddress(), p);
        stale = false;
        const answer = p.waitForResponse((r) => new URL(r.url()).pathname === '/extended/v1/faucets/sbtc');
        await p.keyboard.press('Enter');
        const r = await answer;
        assert.equal(r.status(), 403);
        assert.equal((await r.json()).error, 'sBTC faucet is not available');
        await waitText(p, 'message', /\S/);
        assert.equal(await p.locator('#result-heading').textContent(), 'No sBTC sent');
        assert.equal(await p.locator('#message').textContent(), 'sBTC faucet is not available.');
        // The page reads the facts again at once, not at its next 10 s
        // refresh (7 s away or more): the choice is gone.
        await p.waitForFunction(() => document.getElementById('asset-choice').hidden, null, { timeout: 3_000 });
        assert.equal(await p.locator('h1').textContent(), 'Get testnet STX');
        assert.equal(await p.getByRole('button', { name: 'Send testnet STX' }).count(), 1);
        assert.equal(await p.locator('#stacking').isVisible(), true);
      } finally {
        await p.close();
      }
    }, { needs: [SERVED, STX_ONLY] });

    // sBTC on with no sBTC deployed: the node names no sBTC contract in
    // /v2/pox, so sBTC is today's testnet contract, which this node cannot
    // read: info lists sBTC as "unavailable" with that contract, its
    // decimals unknown. tUSD is real and ready; no flag makes a devnet token
    // run dry (the devnet mints a million drips of any amount), so its
    // "empty" state and the v1 503 are the server's words played back
    // through playwright routes.
    step('sBTC unavailable, tUSD out of funds, BTC off: no BTC option; their states, amounts and messages, STX unaffected', async () => {
      const dry = await launch((port) => devnetArgs(port, ['--devnet-keys', '1', '--devnet-btc=false', '--devnet-sbtc=false', '--sbtc-amount', '100000']));
      const p = await context.newPage();
      const reqs = [];
      watch(p, reqs);
      try {
        const dryInfo = await getInfo(dry.base);
        assert.deepEqual(dryInfo.assets.map((a) => a.asset), ['stx', 'sbtc', 'tusd'], '--devnet-btc=false: no BTC');
        const off = dryInfo.assets.find((a) => a.asset === 'sbtc');
        const sbtcTestnet = 'SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token';
        assert.deepEqual([off.state, off.asset_identifier, off.asset_source, off.decimals, off.funding], ['unavailable', sbtcTestnet, 'default', null, null], JSON.stringify(off));
        assert.match(off.state_message, /cannot read its contract .*is it deployed on this network/);
        const empty = (a) => a.asset === 'tusd'
          ? { ...a, state: 'empty', state_message: `The faucet is out of ${a.name}; its operator has been asked to refill it.`, funding: { drips_left: 0, balance: 0 } }
          : a;
        await p.route('**/faucet/v1/info', async (route) => {
          const response = await route.fetch();
          const json = await response.json();
          json.assets = json.assets.map(empty);
          await route.fulfill({ response, json });
        });
        await p.route((u) => u.pathname === '/extended/v1/faucets/tusd', (route) => route.fulfill({
          status: 503, contentType: 'application/json',
          body: JSON.stringify({ success: false, error: 'The faucet is temporarily out of funds; try again later', reason: 'exhausted' }),
        }));
        await p.goto(`${dry.base}/`);
        await waitReadyState(p);
        assert.deepEqual(await p.getByRole('radio').evaluateAll((rs) => rs.map((r) => r.value)), ['stx', 'sbtc', 'tusd'], 'BTC off: no BTC option');
        assert.equal(await p.locator('h1').textContent(), 'Get testnet STX, sBTC or tUSD');
        assert.equal(await p.locator('#lede-btc').isVisible(), false);
        // The unavailable asset is offered, marked, and says why.
        assert.equal(await p.locator('label.segment', { hasText: 'sBTC' }).textContent(), 'sBTC (unavailable)');
        await typeInto(randomTestnetAddress(), p);
        assert.equal(await p.locator('#submit').isDisabled(), false, 'STX: a valid address enables the button');
        await p.locator('label.segment', { hasText: 'sBTC' }).click(); // the whole segment takes a click
        await waitReadyState(p, 'unavailable');
        assert.match(await p.locator('#faucet-state').textContent(), /Unavailable/);
        assert.equal(await p.locator('#state-message').textContent(), off.state_message);
        assert.equal(await p.locator('#asset-note').textContent(), off.state_message, 'the reason by the button');
        assert.equal(await p.locator('#asset-note').isVisible(), true);
        assert.equal(await p.locator('#default-amount').textContent(), '100,000 base units of sBTC', 'decimals unknown: base units');
        assert.equal(await p.locator('#token-id').textContent(), sbtcTestnet);
        assert.equal(await p.locator('#balance-fact-row').isVisible(), false, 'no funding');
        assert.equal(await p.locator('#submit').isDisabled(), true, 'an unavailable asset cannot be requested');
        assert.equal(await p.evaluate(() => document.getElementById('submit').getAttribute('aria-describedby')), 'asset-note');
        await p.locator('#address').press('Enter');
        await p.waitForTimeout(300);
        assert.deepEqual(extendedRequests(reqs).map((r) => r.url), [], 'Enter sent a drip of an unavailable asset');
        assert.deepEqual(await p.evaluate(contrastProblems), [], 'contrast of the unavailable state and its note');
        assert.deepEqual(await p.evaluate(a11ySmoke), [], 'accessibility smoke (unavailable)');
        await shot('page-desktop-unavailable.png', false, p);

        // tUSD out of funds: its own state; STX stays ready.
        await p.getByRole('radio', { name: 'tUSD' }).check();
        await waitReadyState(p, 'empty');
        assert.match(await p.locator('#faucet-state').textContent(), /Empty/);
        assert.equal(await p.locator('#state-message').textContent(), 'The faucet is out of tUSD; its operator has been asked to refill it.');
        assert.equal(await p.locator('#asset-note').isVisible(), false);
        assert.equal(await p.locator('#default-amount').textContent(), '10 tUSD');
        assert.equal(await p.locator('#balance').textContent(), '0 tUSD (0 drips left)');
        await p.getByRole('radio', { name: 'STX' }).check();
        await waitReadyState(p, 'ready');
        await p.getByRole('radio', { name: 'tUSD' }).check();
        const answer = p.waitForResponse((r) => new URL(r.url()).pathname === '/extended/v1/faucets/tusd');
        await p.locator('#address').press('Enter');
        assert.equal((await answer).status(), 503);
        await waitText(p, 'message', /\S/);
        assert.equal(await p.locator('#result-heading').textContent(), 'No tUSD sent');
        assert.equal(await p.locator('#message').textContent(), 'The faucet is temporarily out of funds; try again later.');
        assert.deepEqual(await p.evaluate(contrastProblems), [], 'contrast of the empty state and the error');
        await shot('page-desktop-token-503.png', true, p);
      } finally {
        await p.close();
        await dry.stop();
      }
    }, { needs: [] });

    // STX turned off by its operator (--disable-asset stx): the page opens
    // on sBTC, marks STX "(off)", and chosen, says why and cannot send it.
    step('STX turned off: the page opens on sBTC, STX marked off and not requestable', async () => {
      const off = await launch((port) => devnetArgs(port, ['--devnet-keys', '1', '--devnet-btc=false', '--disable-asset', 'stx']));
      const p = await context.newPage();
      try {
        const offInfo = await getInfo(off.base);
        const stx = offInfo.assets.find((a) => a.asset === 'stx');
        assert.equal(stx.state, 'off', JSON.stringify(stx));
        await p.goto(`${off.base}/`);
        await waitReadyState(p);
        assert.equal(await p.locator('input[name="asset"]:checked').getAttribute('value'), 'sbtc', 'opens on the first asset that is on');
        assert.equal(await p.locator('label.segment', { hasText: 'STX' }).textContent(), 'STX (off)');
        await p.locator('label.segment', { hasText: 'STX' }).click();
        await waitReadyState(p, 'off');
        assert.match(await p.locator('#faucet-state').textContent(), /Off/);
        assert.equal(await p.locator('#state-message').textContent(), stx.state_message);
        await typeInto(randomTestnetAddress(), p);
        assert.equal(await p.locator('#submit').isDisabled(), true, 'an asset that is off cannot be requested');
      } finally {
        await p.close();
        await off.stop();
      }
    }, { needs: [] });

    // A chain that makes no block (--block-time 1h) for --stall-after: the
    // page shows the stalled state with the faucet's message, and a drip
    // can still be asked for (it waits for the chain, it does not fail).
    step('a stalled chain: the page says so and drips stay requestable', async () => {
      const stalled = await launch((port) => devnetArgs(port, ['--devnet-keys', '1', '--devnet-btc=false',
        '--block-time', '1h', '--stall-after', '2s']));
      const p = await context.newPage();
      try {
        let stx = null;
        for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(500)) {
          stx = (await getInfo(stalled.base)).assets.find((a) => a.asset === 'stx');
          if (stx.state === 'stalled') break;
        }
        assert.equal(stx.state, 'stalled', JSON.stringify(stx));
        const said = /^No new Stacks block for \d+ s: the chain looks stalled\. Drips are still accepted/;
        assert.match(stx.state_message, said);
        await p.goto(`${stalled.base}/`);
        await waitReadyState(p, 'stalled');
        assert.match(await p.locator('#faucet-state').textContent(), /Chain stalled/);
        assert.match(await p.locator('#state-message').textContent(), said);
        await typeInto(randomTestnetAddress(), p);
        assert.equal(await p.locator('#submit').isDisabled(), false, 'a stalled chain still takes drips');
        assert.deepEqual(await p.evaluate(contrastProblems), [], 'contrast of the stalled state');
      } finally {
        await p.close();
        await stalled.stop();
      }
    }, { needs: [] });

    // ------------------------------------------------------------ budgets

    /**
     * dripTo types to into p's field and presses Enter, then waits for the
     * result: a txid other than old, or a refusal. It returns the txid (''
     * when refused) and the drip requests the page made.
     */
    const dripTo = async (p, reqs, to, old = '') => {
      const from = extendedRequests(reqs).length;
      await typeInto(to, p);
      assert.equal(await p.locator('#submit').isDisabled(), false, `the button is disabled for ${to}`);
      await p.locator('#address').press('Enter');
      await p.waitForFunction((prev) => {
        const result = document.getElementById('result');
        const t = document.getElementById('txid').textContent;
        if (result.hidden) return false;
        return result.dataset.kind !== 'success' || (!document.getElementById('tx').hidden && t !== prev && /^0x[0-9a-f]{64}$/.test(t));
      }, old, { timeout: 30_000 }).catch(async (err) => {
        throw new Error(`no result for ${to}: ${err.message}; result says ${JSON.stringify(await p.locator('#result').textContent())}`);
      });
      const kind = await p.locator('#result').getAttribute('data-kind');
      return { txid: kind === 'success' ? await p.locator('#txid').textContent() : '', drips: extendedRequests(reqs).slice(from) };
    };

    /**
     * stateChecks: on a 390×844 phone (the field and the button above the
     * fold) and on a desktop, in both themes: names, contrast, no sideways
     * scroll; phone screenshots as shotName(-dark).png. Ends light, desktop.
     */
    const stateChecks = async (p, label, shotName) => {
      for (const [width, height] of [[390, 844], [1280, 900]]) {
        await p.setViewportSize({ width, height });
        await p.evaluate(() => window.scrollTo(0, 0));
        for (const scheme of ['light', 'dark']) {
          await p.emulateMedia({ colorScheme: scheme });
          if (width === 390) {
            for (const id of ['address', 'submit']) {
              const box = await p.locator(`#${id}`).boundingBox();
              assert.ok(box && box.y >= 0 && box.y + box.height <= height, `#${id} at ${JSON.stringify(box)}: below the fold (${label})`);
            }
            if (shotName) await shot(`${shotName}${scheme === 'dark' ? '-dark' : ''}.png`, false, p);
          }
          assert.ok(await p.evaluate((w) => document.documentElement.scrollWidth <= w, width), `scrollWidth > ${width} (${label})`);
          assert.deepEqual(await p.evaluate(a11ySmoke), [], `accessibility smoke (${scheme}, ${width} px, ${label})`);
          assert.deepEqual(await p.evaluate(contrastProblems), [], `contrast (${scheme}, ${width} px, ${label})`);
        }
      }
      await p.emulateMedia({ colorScheme: 'light' });
    };

    // A faucet with a small STX budget: 1,750 STX in any 30 minutes, 3.5
    // drips of 500 STX, and limits loose enough that only the budget stops
    // drips. Half an hour, not an hour: the wait it ends with is below an
    // hour, where the countdown shows its seconds ticking.
    const BUDGET_STX = 1_750_000_000;
    let budgetFaucet = null;
    let budgetPage = null;
    const budgetReqs = [];
    const budgetTxids = [];
    const BUDGET_DRAINED = 'a small STX budget: the page shows what is left; drips pay 500, 500, 500, then a scaled 250 STX, as their status says';
    step(BUDGET_DRAINED, async () => {
      budgetFaucet = await launch((port) => devnetArgs(port, ['--devnet-keys', '1', '--devnet-btc=false', '--pow-difficulty', String(POW_DIFFICULTY),
        '--limit-address', '100/1h', '--limit-ip', '100/1h', '--budget', `asset=stx,amount=${BUDGET_STX},per=30m`]));
      const b = budgetFaucet.base;
      const stx = (await getInfo(b)).assets.find((a) => a.asset === 'stx');
      // Stacking drips may take half of it together (none is asked here).
      assert.deepEqual(stx.budget, { amount: BUDGET_STX, period_seconds: 1800, left: BUDGET_STX, scale_below_percent: 25, floor_percent: 10,
        stacking_share: { percent: 50, amount: BUDGET_STX / 2, left: BUDGET_STX / 2 } });
      assert.deepEqual(stx.runway, { seconds: null, outflow_last_hour: 0 }, 'nothing flowed out yet');
      budgetPage = await context.newPage();
      const p = budgetPage;
      watch(p, budgetReqs);
      await p.goto(`${b}/`);
      await waitReadyState(p);
      assert.equal(await p.locator('#budget-label').textContent(), 'Budget per 30 min');
      assert.equal(await p.locator('#budget').textContent(), '1,750 of 1,750 STX left');
      assert.equal(await p.locator('#budget-bar').evaluate((e) => e.style.width), '100%');
      for (const id of ['share-fact-row', 'runway-fact-row', 'budget-note', 'drip-amount', 'account']) {
        assert.equal(await p.locator(`#${id}`).isVisible(), false, `#${id}: no share, no outflow, nothing low, no sign-in`);
      }
      for (const [i, want] of [500, 500, 500, 250].entries()) {
        if (i === 3) {
          // 250 STX left (14 %), below the 25 % where drips scale down:
          // the page says so from info before the drip.
          await waitText(p, 'budget', /^250 of 1,750 STX left$/, 15_000);
          assert.equal(await p.locator('#budget-note').textContent(), 'Little is left of the STX budget: drips are smaller now, down to 10 % of a full drip.');
          assert.equal(await p.locator('#drip-amount').textContent(), 'Each drip for you: 500 STX, less while little is left of the budget.');
          assert.equal(await p.locator('#budget-bar').getAttribute('data-low'), 'true');
          assert.equal(await p.locator('#budget-bar').evaluate((e) => e.style.width), '14.2%');
          await shot('page-desktop-budget-low.png', false, p);
        }
        const to = randomTestnetAddress();
        const { txid, drips } = await dripTo(p, budgetReqs, to, budgetTxids.at(-1));
        assert.ok(txid, `drip ${i + 1} was refused: ${await p.locator('#result').innerText()}`);
        budgetTxids.push(txid);
        assert.equal(drips.length, 1);
        assertProof(drips[0].headers);
        // v1 answers carry no amount: the page shows what the drip's status says it paid.
        const less = want < 500 ? ' That is less than a full drip (500 STX): drips are smaller while little is left of the budget.' : '';
        assert.equal(await p.locator('#message').textContent(), `The faucet sent ${want} STX to ${to}.${less} It arrives when the transaction is in a block.`);
        const d = await (await fetch(`${b}/faucet/v1/drips/${txid}`)).json();
        assert.equal(d.amount, String(want * 1_000_000), `drip ${i + 1}'s status: ${JSON.stringify(d)}`);
        assert.match(await recentItem(p, txid).textContent(), new RegExp(`^${want} STX · `), 'the recent drips show what it paid');
      }
      // What info says now, once the page has read it again: nothing left, and the runway.
      await waitText(p, 'budget', /^0 of 1,750 STX left$/, 15_000);
      const now = (await getInfo(b)).assets.find((a) => a.asset === 'stx');
      assert.equal(await p.locator('#budget').textContent(), formatLeft(now.budget.left, now.budget.amount, 6, 'STX'), 'the budget line reads what info says');
      assert.equal(now.runway.outflow_last_hour, BUDGET_STX, JSON.stringify(now.runway));
      assert.ok(Number.isSafeInteger(now.runway.seconds), JSON.stringify(now.runway));
      assert.equal(await p.locator('#runway').textContent(), `At the last hour's rate the faucet's STX lasts ${formatAbout(now.runway.seconds)}.`);
      assert.equal(await p.locator('#budget-note').textContent(), 'The STX budget is used up for now: drips resume as the drips of the last 30 minutes age out.');
      assert.equal(await p.locator('#drip-amount').textContent(), 'Each drip for you: 500 STX; none until the budget allows again.');
    }, { needs: [] });

    step('the budget used up: the server\'s 500 budget_exhausted, its message, detail and a countdown; the recent drips stay', async () => {
      const p = budgetPage;
      try {
        const to = randomTestnetAddress();
        const answer = p.waitForResponse((r) => new URL(r.url()).pathname === '/extended/v1/faucets/stx');
        const { txid } = await dripTo(p, budgetReqs, to, budgetTxids.at(-1));
        assert.equal(txid, '', 'a drip past the budget');
        const r = await answer;
        assert.equal(r.status(), 500, 'v1 STX keeps the incumbent\'s 500');
        const body = await r.json();
        assert.equal(body.reason, 'budget_exhausted', JSON.stringify(body));
        // Until the first drip's step (a 60th of the window) leaves it.
        assert.ok(body.retry_after_seconds > 1700 && body.retry_after_seconds <= 1830, JSON.stringify(body));
        assert.equal(await p.locator('#result').getAttribute('data-kind'), 'wait');
        assert.equal(await p.locator('#result-heading').textContent(), 'No STX sent');
        assert.equal(await p.evaluate(() => document.activeElement?.id), 'result-heading', 'focus moves to the result');
        const first = await p.locator('#message').textContent();
        assert.match(first, new RegExp(`^${escapeRe(body.error)}\\. Drips resume in ${WAIT.source}\\.$`));
        assert.match(first, /Drips resume in (29|30) min/, 'about half an hour, the window\'s');
        // The detail, a sentence of its own: which budget is spent.
        assert.equal(await p.locator('#result-detail').textContent(), `${body.detail.charAt(0).toUpperCase()}${body.detail.slice(1)}.`);
        assert.match(await p.locator('#result-detail').textContent(), /^The STX budget of 1,750 STX per 30 min is used up\.$/);
        await p.waitForTimeout(2100);
        assert.notEqual(await p.locator('#message').textContent(), first, 'the countdown does not move');
        // The budget holds every address back, not only this one.
        await typeInto(randomTestnetAddress(), p);
        assert.equal(await p.locator('#submit').isDisabled(), true, 'another address while the budget is used up');
        const ids = await p.locator('#recent-list li').evaluateAll((els) => els.map((e) => e.dataset.txid));
        assert.deepEqual(new Set(ids), new Set(budgetTxids), 'the recent drips stay');
        await shot('page-desktop-budget-exhausted.png', true, p);
        await stateChecks(p, 'budget used up', 'page-390-budget-exhausted');
      } finally {
        await p.close();
        await budgetFaucet.stop();
      }
    }, { needs: [BUDGET_DRAINED] });

    // ------------------------------------------------------------ sign-in
    //
    // bin/oidc-provider with one verified user, and devnet faucets that
    // sign in with it: the default tiers (signed-in: 200 %, no proof of
    // work, 20 drips a day; anonymous: the proof of work, half the budget).

    const signIn = {
      dir: null, provider: null, providerPort: 0, faucet: null, off: null, issuer: '', offPort: 0, password: '', ctx: null, page: null, reqs: [],
    };
    const USER = { id: 'u-alice', username: 'alice', email: 'alice@example.com', emailVerified: true, name: 'Alice', groups: ['devs'] };
    const OFFER = 'Developers signed in with a verified email get 2× drips, no proof of work, 20 drips of each asset every day.';
    const SIGNED_IN_TEXT = 'Signed in as alice@example.com — signed-in: 2× drips, no proof of work, 20 drips of each asset every day.';
    const signInLink = (p) => p.getByRole('link', { name: 'Sign in', exact: true });
    const sessionCookie = async (b) => (await signIn.ctx.cookies(b)).find((c) => c.name === 'faucet_session');
    const challengesOf = (reqs) => reqs.filter((r) => r.method === 'POST' && new URL(r.url).pathname === '/faucet/v1/challenge').length;

    /** startProvider starts bin/oidc-provider on its port with the user and the faucet's client. */
    const startProvider = async () => {
      const file = (name) => path.join(signIn.dir, name);
      signIn.provider = await launch((port) => ['--addr', `127.0.0.1:${port}`, '--issuer', signIn.issuer,
        '--users-file', file('users.json'), '--clients-file', file('clients.json')], '/ready', { bin: opts.oidcProvider, port: signIn.providerPort });
    };

    /** providerLogin fills the provider's form on p; it stays there (wrong password) or goes back to the faucet. */
    const providerLogin = async (p, password) => {
      await p.waitForURL((u) => u.origin === signIn.issuer, { timeout: 15_000 });
      await p.locator('#username').waitFor();
      await p.fill('#username', USER.username);
      await p.fill('#password', password);
      await p.click('#submit');
    };

    const SIGN_IN_OFFERED = 'sign-in: the page offers "Sign in" with what it gives; an anonymous drip pays the configured 500 STX with the proof of work';
    step(SIGN_IN_OFFERED, async () => {
      signIn.dir = await mkdtemp(path.join(tmpdir(), 'pagetest-oidc-'));
      const [faucetPort, providerPort] = [await freePort(), await freePort()];
      signIn.offPort = await freePort();
      signIn.issuer = `http://127.0.0.1:${providerPort}`;
      signIn.password = randomBytes(12).toString('hex');
      const secret = randomBytes(24).toString('hex');
      const file = (name) => path.join(signIn.dir, name);
      await writeFile(file('users.json'), JSON.stringify([{ ...USER, password: signIn.password }]), { mode: 0o600 });
      await writeFile(file('clients.json'), JSON.stringify([{ id: 'faucet', secret, accessTokenJWT: true,
        redirectURIs: [faucetPort, signIn.offPort].map((port) => `http://127.0.0.1:${port}/faucet/v1/auth/callback`) }]), { mode: 0o600 });
      await writeFile(file('secret'), `${secret}\n`, { mode: 0o600 });
      signIn.providerPort = providerPort;
      await startProvider();
      signIn.faucet = await launch((port) => devnetArgs(port, ['--devnet-keys', '1', '--devnet-btc=false', '--pow-difficulty', String(POW_DIFFICULTY),
        '--oidc-issuer', signIn.issuer, '--oidc-client-id', 'faucet', '--oidc-client-secret-file', file('secret')]), undefined, { port: faucetPort });
      const b = signIn.faucet.base;
      const info = await getInfo(b);
      assert.deepEqual(info.sign_in, {
        enabled: true, issuer: signIn.issuer, login: '/faucet/v1/auth/login', logout: '/faucet/v1/auth/logout', session: '/faucet/v1/auth/session',
        anonymous_drips: true, tiers: [
          { name: 'anonymous', amount_percent: 100, limit: null, skip_proof_of_work: false, budget_share_percent: 50 },
          { name: 'signed-in', amount_percent: 200, limit: { requests: 20, window_seconds: 86400 }, skip_proof_of_work: true, budget_share_percent: 100,
            match: 'signed in with a verified email' },
        ],
      });
      // A context of its own: its cookies are the sign-in's.
      signIn.ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light', reducedMotion: 'reduce' });
      const p = signIn.page = await signIn.ctx.newPage();
      watch(p, signIn.reqs);
      await p.goto(`${b}/`);
      await waitReadyState(p);
      await signInLink(p).waitFor();
      assert.equal(await signInLink(p).getAttribute('href'), `${b}/faucet/v1/auth/login?return=%2F`);
      assert.equal(await p.locator('#account-text').textContent(), OFFER);
      assert.equal(await p.locator('#sign-out').isVisible(), false);
      assert.equal(await p.locator('#drip-amount').textContent(), 'Each drip for you: 500 STX.');
      // Without sign-in a drip draws from the anonymous half of the budget.
      const share = info.assets[0].budget.shares[0];
      assert.deepEqual([share.tier, share.percent], ['anonymous', 50], JSON.stringify(info.assets[0].budget));
      assert.equal(await p.locator('#share-label').textContent(), 'Anonymous share (50 %)');
      assert.equal(await p.locator('#share').textContent(), formatLeft(share.left, share.amount, 6, 'STX'));
      await shot('page-desktop-sign-in.png', false, p);
      await stateChecks(p, 'sign-in offered', 'page-390-sign-in');

      const to = randomTestnetAddress();
      const { txid, drips } = await dripTo(p, signIn.reqs, to);
      assert.ok(txid, await p.locator('#result').innerText());
      assert.equal(drips.length, 1);
      assertProof(drips[0].headers);
      assert.equal(challengesOf(signIn.reqs), 1);
      assert.equal(await p.locator('#message').textContent(), `The faucet sent 500 STX to ${to}. It arrives when the transaction is in a block.`);
      assert.equal((await (await fetch(`${b}/faucet/v1/drips/${txid}`)).json()).amount, '500000000');
    }, { needs: [] });

    // The faucet reads the provider's discovery document at the first
    // sign-in and keeps it; until then a provider that is down makes Sign
    // in answer the faucet's own 503 page (it tries again after 5 s).
    const PROVIDER_BACK = 'the provider down: Sign in answers the faucet\'s 503 page; back on the page an anonymous drip works; the provider back, Sign in works';
    step(PROVIDER_BACK, async () => {
      const p = signIn.page;
      const b = signIn.faucet.base;
      await signIn.provider.stop();
      const login = p.waitForResponse((r) => new URL(r.url()).pathname === '/faucet/v1/auth/login');
      await signInLink(p).click();
      assert.equal((await login).status(), 503);
      await p.locator('#error').waitFor();
      assert.match(await p.locator('#error').textContent(),
        /^Sign-in is unavailable: the faucet cannot reach its sign-in provider\. Drips without sign-in still work/);
      assert.equal(new URL(p.url()).origin, b, 'the faucet\'s own page');
      await shot('page-sign-in-unavailable.png', false, p);
      await p.getByRole('link', { name: 'Back to the faucet' }).click();
      await waitReadyState(p);
      await signInLink(p).waitFor();
      const to = randomTestnetAddress();
      const { txid, drips } = await dripTo(p, signIn.reqs, to);
      assert.ok(txid, await p.locator('#result').innerText());
      assertProof(drips[0].headers);
      assert.equal(await p.locator('#message').textContent(), `The faucet sent 500 STX to ${to}. It arrives when the transaction is in a block.`);
      // Back: the login redirects to the provider once the faucet tries again.
      await startProvider();
      let status = 0;
      for (const deadline = Date.now() + 20_000; status !== 302 && Date.now() < deadline; await sleep(500)) {
        status = (await fetch(`${b}/faucet/v1/auth/login?return=/`, { redirect: 'manual' })).status;
      }
      assert.equal(status, 302, 'the login does not redirect to the provider that is back');
    }, { needs: [SIGN_IN_OFFERED] });

    const SIGNED_IN = 'sign-in: Sign in → the provider\'s form (a wrong password stays there with its error) → back on the page, signed in with the tier';
    step(SIGNED_IN, async () => {
      const p = signIn.page;
      const b = signIn.faucet.base;
      await signInLink(p).click();
      await providerLogin(p, `wrong-${signIn.password}`);
      await p.locator('#error').waitFor({ timeout: 10_000 });
      assert.match(await p.locator('#error').textContent(), /\S/);
      assert.equal(new URL(p.url()).origin, signIn.issuer, 'a wrong password stays on the provider');
      assert.equal(await p.locator('#password').isVisible(), true, 'its form again');
      assert.equal(await sessionCookie(b), undefined, 'no session');
      await shot('page-provider-wrong-password.png', false, p);

      await providerLogin(p, signIn.password);
      await p.waitForURL(`${b}/`, { timeout: 15_000 });
      await waitText(p, 'account-text', /^Signed in as /);
      assert.equal(await p.locator('#account-text').textContent(), SIGNED_IN_TEXT);
      assert.equal(await p.getByRole('button', { name: 'Sign out' }).isVisible(), true);
      assert.equal(await signInLink(p).count(), 0, 'no Sign in link while signed in');
      assert.equal(await p.locator('#drip-amount').textContent(), 'Each drip for you: 1,000 STX (signed-in: 2× the usual 500 STX).');
      assert.equal(await p.locator('#share-fact-row').isVisible(), false, 'the signed-in tier draws from the whole budget');
      const cookie = await sessionCookie(b);
      assert.ok(cookie && cookie.httpOnly && cookie.sameSite === 'Lax', `the session cookie: ${JSON.stringify(cookie)}`);
      const session = await p.evaluate(async () => (await fetch('faucet/v1/auth/session')).json());
      assert.deepEqual([session.signed_in, session.name, session.tier?.name], [true, USER.email, 'signed-in'], JSON.stringify(session));
      await p.evaluate(recordPage);
      await shot('page-desktop-signed-in.png', false, p);
      await stateChecks(p, 'signed in', 'page-390-signed-in');
    }, { needs: [PROVIDER_BACK] });

    const SIGNED_IN_DRIP = 'signed in: a drip pays 1,000 STX (200 %) with no proof of work; the recipient\'s balance rises by exactly that';
    step(SIGNED_IN_DRIP, async () => {
      const p = signIn.page;
      const node = signIn.faucet.nodeURL;
      const to = randomTestnetAddress();
      const before = await stxBalance(node, to);
      const challenges = challengesOf(signIn.reqs);
      const { txid, drips } = await dripTo(p, signIn.reqs, to);
      assert.ok(txid, await p.locator('#result').innerText());
      assert.equal(drips.length, 1);
      assert.equal(drips[0].headers['x-faucet-solution'], undefined, `no X-Faucet-Solution: ${JSON.stringify(drips[0].headers)}`);
      assert.equal(drips[0].headers['x-faucet-challenge'], undefined);
      assert.equal(challengesOf(signIn.reqs), challenges, 'no challenge fetched');
      assert.equal((await p.evaluate(() => window.__pagetest)).powShown, false, 'the proof of work never showed');
      assert.equal(await p.locator('#message').textContent(), `The faucet sent 1,000 STX to ${to}. It arrives when the transaction is in a block.`);
      assert.equal((await (await fetch(`${signIn.faucet.base}/faucet/v1/drips/${txid}`)).json()).amount, '1000000000');
      assert.match(await recentItem(p, txid).textContent(), /^1,000 STX · /);
      await waitText(p, 'tx-state', /^Confirmed in block \d+\.$/);
      assert.equal(await stxBalance(node, to) - before, 1_000_000_000n, 'GET /v2/accounts: the balance rose by 1,000 STX');
      await shot('page-desktop-signed-in-drip.png', true, p);
    }, { needs: [SIGNED_IN] });

    step('sign out by keyboard: the page is anonymous again, and the next drip asks for the proof of work', async () => {
      const p = signIn.page;
      const b = signIn.faucet.base;
      const logout = p.waitForResponse((r) => new URL(r.url()).pathname === '/faucet/v1/auth/logout');
      await p.locator('#sign-out').focus();
      await p.keyboard.press('Enter');
      const r = await logout;
      assert.deepEqual([r.request().method(), r.status()], ['POST', 204]);
      await signInLink(p).waitFor();
      assert.equal(await p.evaluate(() => document.activeElement?.id), 'sign-in', 'the focus moves to Sign in');
      assert.equal(await p.locator('#account-status').textContent(), 'Signed out.');
      assert.equal(await p.locator('#account-text').textContent(), OFFER);
      assert.equal(await p.locator('#sign-out').isVisible(), false);
      assert.equal(await p.locator('#drip-amount').textContent(), 'Each drip for you: 500 STX.');
      assert.equal(await sessionCookie(b), undefined, 'the cookie is cleared');
      const to = randomTestnetAddress();
      const { txid, drips } = await dripTo(p, signIn.reqs, to);
      assert.ok(txid, await p.locator('#result').innerText());
      assertProof(drips[0].headers);
      assert.equal((await p.evaluate(() => window.__pagetest)).powShown, true, 'the proof of work showed');
      assert.equal(await p.locator('#message').textContent(), `The faucet sent 500 STX to ${to}. It arrives when the transaction is in a block.`);
    }, { needs: [SIGNED_IN_DRIP] });

    step('?sign_in_error=access_denied: said in words, and dropped from the address', async () => {
      const p = signIn.page;
      const b = signIn.faucet.base;
      await p.goto(`${b}/?sign_in_error=access_denied`);
      await waitText(p, 'sign-in-error', /^Sign-in was cancelled; you are not signed in\.$/);
      assert.equal(await p.getByRole('alert').textContent(), 'Sign-in was cancelled; you are not signed in.');
      assert.equal(p.url(), `${b}/`, 'the code is gone from the address');
      await signInLink(p).waitFor();
      assert.deepEqual(await p.evaluate(contrastProblems), [], 'contrast of the sign-in error');
      await shot('page-desktop-sign-in-error.png', false, p);
    }, { needs: [SIGN_IN_OFFERED] });

    step('anonymous drips off: the button asks to sign in first and leads to the provider; signed in it drips', async () => {
      signIn.off = await launch((port) => devnetArgs(port, ['--devnet-keys', '1', '--devnet-btc=false', '--anonymous-drips=false',
        '--oidc-issuer', signIn.issuer, '--oidc-client-id', 'faucet', '--oidc-client-secret-file', path.join(signIn.dir, 'secret')]),
      undefined, { port: signIn.offPort });
      const b = signIn.off.base;
      // Cookies are per host, not per port: a context of its own, signed out.
      const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light', reducedMotion: 'reduce' });
      try {
        const p = await ctx.newPage();
        const reqs = [];
        watch(p, reqs);
        assert.equal((await getInfo(b)).sign_in.anonymous_drips, false);
        const refused = await fetch(`${b}/extended/v1/faucets/stx?address=${randomTestnetAddress()}`, { method: 'POST' });
        assert.equal(refused.status, 401);
        assert.equal((await refused.json()).reason, 'sign_in_required');
        await p.goto(`${b}/`);
        await waitReadyState(p);
        const button = p.getByRole('button', { name: 'Sign in to request STX' });
        await button.waitFor();
        assert.equal(await button.isDisabled(), false, 'no address is needed to sign in');
        assert.equal(await p.locator('#account-text').textContent(), `This faucet drips to signed-in developers only. ${OFFER}`);
        for (const id of ['drip-amount', 'share-fact-row']) {
          assert.equal(await p.locator(`#${id}`).isVisible(), false, `#${id}: nothing is paid without signing in`);
        }
        await shot('page-desktop-sign-in-required.png', false, p);
        await button.click();
        await providerLogin(p, signIn.password);
        await p.waitForURL(`${b}/`, { timeout: 15_000 });
        await waitText(p, 'account-text', /^Signed in as /);
        assert.equal(await p.getByRole('button', { name: 'Send testnet STX' }).count(), 1);
        assert.equal(await p.locator('#drip-amount').textContent(), 'Each drip for you: 1,000 STX (signed-in: 2× the usual 500 STX).');
        assert.deepEqual(extendedRequests(reqs), [], 'no drip was asked for');
        const to = randomTestnetAddress();
        const { txid, drips } = await dripTo(p, reqs, to);
        assert.ok(txid, await p.locator('#result').innerText());
        assert.equal(drips[0].headers['x-faucet-solution'], undefined);
        assert.equal(await p.locator('#message').textContent(), `The faucet sent 1,000 STX to ${to}. It arrives when the transaction is in a block.`);
      } finally {
        await ctx.close();
        // The last sign-in step: everything it started stops.
        await signIn.ctx.close();
        for (const proc of [signIn.off, signIn.faucet, signIn.provider]) await proc.stop();
        await rm(signIn.dir, { recursive: true, force: true });
      }
    }, { needs: [PROVIDER_BACK] });

    // --------------------------------------------------------- event code
    //
    // A workshop's room shares one address: a faucet with a per-IP limit of
    // one drip an hour and an API token, "workshop", that an organiser
    // hands out as the event code (50 drips an hour, 5 per address).

    const event = { dir: null, faucet: null, page: null, reqs: [], console: [] };
    const EVENT_CODE = `evt-${randomBytes(12).toString('hex')}`;
    const WRONG_CODE = `evt-${randomBytes(12).toString('hex')}`;
    const LATER_CODE = `evt-${randomBytes(12).toString('hex')}`; // a right code whose event has not begun
    const eligibilityOf = (reqs) => reqs.filter((r) => new URL(r.url).pathname === '/faucet/v1/eligibility');

    const EVENT_PAID = 'an event code: without it the per-IP limit refuses a second drip; typed in by keyboard, drips to three more addresses pay with no proof of work';
    step(EVENT_PAID, async () => {
      event.dir = await mkdtemp(path.join(tmpdir(), 'pagetest-tokens-'));
      const tokens = path.join(event.dir, 'api-tokens');
      await writeFile(tokens, `# name token quota per-address\nworkshop ${EVENT_CODE} 50/1h 5/1h\nnext-year ${LATER_CODE} 50/1h 5/1h from=2030-12-05T09:00:00Z\n`, { mode: 0o600 });
      event.faucet = await launch((port) => devnetArgs(port, ['--devnet-keys', '1', '--devnet-btc=false', '--pow-difficulty', String(POW_DIFFICULTY),
        '--limit-ip', '1/1h', '--api-tokens-file', tokens]));
      const b = event.faucet.base;
      const p = event.page = await context.newPage();
      watch(p, event.reqs);
      p.on('console', (m) => event.console.push(m.text()));
      await p.goto(`${b}/`);
      await waitReadyState(p);
      await p.evaluate(recordPage);
      assert.equal(await p.locator('#event-code-box').evaluate((d) => d.open), false, 'the event code is closed until asked for');
      assert.equal(await p.locator('#event-code').isVisible(), false);
      assert.equal(await p.locator('#event-code-toggle').textContent(), 'Have an event or API code?');

      // Without a code: the room's first drip pays (with the proof of
      // work); the next one, to another address, meets the per-IP limit.
      const first = await dripTo(p, event.reqs, randomTestnetAddress());
      assert.ok(first.txid, await p.locator('#result').innerText());
      assertProof(first.drips[0].headers);
      assert.equal(first.drips[0].headers.authorization, undefined, 'no Authorization without a code');
      assert.equal(eligibilityOf(event.reqs).length, 0, 'no eligibility question without a code');
      const second = randomTestnetAddress();
      const answer = p.waitForResponse((r) => new URL(r.url()).pathname === '/extended/v1/faucets/stx');
      assert.equal((await dripTo(p, event.reqs, second, first.txid)).txid, '', 'a second drip from the same IP');
      const r = await answer;
      assert.equal(r.status(), 429);
      assert.equal((await r.json()).reason, 'rate_limited');
      assert.match(await r.headerValue('ratelimit-policy') || '', /"ip";q=1;w=3600/, 'the per-IP limit refused it');
      assert.match(await p.locator('#message').textContent(), new RegExp(`^Too many STX requests from your network\\. Try again in ${WAIT.source}\\.$`));
      assert.equal(await p.locator('#submit').isDisabled(), true);
      // The network's limit holds back every address, not only this one.
      await typeInto(randomTestnetAddress(), p);
      assert.equal(await p.locator('#submit').isDisabled(), true, 'another address from the same network');

      // By keyboard: after the (disabled) button comes the disclosure; Enter opens it.
      await p.locator('#stacking').focus();
      await p.keyboard.press('Tab');
      const ring = await focusRing(p);
      assert.equal(ring.id, 'event-code-toggle', 'Tab from the stacking option (the button is disabled) reaches "Have an event or API code?"');
      assert.ok(ring.outline !== 'none' && ring.width >= 2, `focus ring on the summary: ${JSON.stringify(ring)}`);
      await p.keyboard.press('Enter');
      assert.equal(await p.locator('#event-code-box').evaluate((d) => d.open), true, 'Enter opens it');
      await p.keyboard.press('Tab');
      assert.equal(await p.evaluate(() => document.activeElement?.id), 'event-code');
      assert.equal(await p.getByRole('textbox', { name: 'Event or API code' }).count(), 1, 'the field is named by its label');
      assert.match(await p.locator('#event-code-hint').textContent(), /^Organisers of workshops and hackathons hand one out\. It lifts the limit per network/);
      // Pasted with the whitespace around it: trimmed.
      await p.keyboard.insertText(`  ${EVENT_CODE} `);
      assert.equal(await p.locator('#submit').isDisabled(), false, 'with a code the per-IP wait no longer holds the address back');
      await stateChecks(p, 'event code open');

      await p.evaluate(() => { window.__pagetest.powShown = false; });
      const challenges = challengesOf(event.reqs);
      let last = first.txid;
      for (const to of [second, randomTestnetAddress(), randomTestnetAddress()]) {
        const asked = eligibilityOf(event.reqs).length;
        const { txid, drips } = await dripTo(p, event.reqs, to, last);
        assert.ok(txid, `the drip to ${to} with the code: ${await p.locator('#result').innerText()}`);
        last = txid;
        assert.equal(drips.length, 1);
        const h = drips[0].headers;
        assert.equal(h.authorization, `Bearer ${EVENT_CODE}`, `the drip carries the code: ${JSON.stringify(h)}`);
        assert.equal(h['x-faucet-challenge'], undefined, `no proof of work: ${JSON.stringify(h)}`);
        assert.equal(h['x-faucet-solution'], undefined);
        const q = eligibilityOf(event.reqs).slice(asked);
        assert.equal(q.length, 1, 'one eligibility question before the drip');
        assert.equal(q[0].headers.authorization, `Bearer ${EVENT_CODE}`, 'the question carries the code');
        assert.deepEqual([...new URL(q[0].url).searchParams], [['asset', 'stx'], ['address', to]]);
        assert.equal(await p.locator('#message').textContent(), `The faucet sent 500 STX to ${to}. It arrives when the transaction is in a block.`);
        assert.equal(await p.locator('#result-detail').isVisible(), false, 'nothing said of the code: the faucet took it');
        assert.equal((await (await fetch(`${b}/faucet/v1/drips/${txid}`)).json()).amount, '500000000');
      }
      assert.equal(challengesOf(event.reqs), challenges, 'no challenge fetched with the code');
      assert.equal((await p.evaluate(() => window.__pagetest)).powShown, false, 'the proof of work never showed');
      // The code is kept nowhere but in the field.
      const kept = await p.evaluate(() => JSON.stringify([{ ...localStorage }, { ...sessionStorage }, location.href, document.cookie]));
      assert.ok(!kept.includes(EVENT_CODE), `the code is stored: ${kept}`);
      assert.ok(event.reqs.every((q) => !q.url.includes(EVENT_CODE)), 'the code in a URL');
      assert.ok(event.console.every((t) => !t.includes(EVENT_CODE)), 'the code in the console');
    }, { needs: [] });

    step('a wrong event code: refused in words, the field focused; one outside its dates: the server\'s message; too many wrong ones: the lock-out counts down', async () => {
      const p = event.page;
      const b = event.faucet.base;
      try {
        await p.locator('#event-code').fill(WRONG_CODE);
        const judged = p.waitForResponse((r) => new URL(r.url()).pathname === '/faucet/v1/eligibility');
        const { txid, drips } = await dripTo(p, event.reqs, randomTestnetAddress());
        assert.equal(txid, '');
        assert.deepEqual(drips, [], 'no drip is asked for with a refused code');
        const body = await (await judged).json();
        assert.deepEqual([body.eligible, body.reason], [false, 'token_invalid'], JSON.stringify(body));
        assert.equal(await p.locator('#result').getAttribute('data-kind'), 'error');
        assert.equal(await p.locator('#result-heading').textContent(), 'No STX sent');
        assert.equal(await p.locator('#message').textContent(), CODE_TEXTS.invalid.message);
        assert.equal(await p.evaluate(() => document.activeElement?.id), 'event-code', 'the code field has the focus');
        assert.equal(await p.locator('#event-code').getAttribute('aria-invalid'), 'true');
        assert.equal(await p.locator('#event-code-error').textContent(), CODE_TEXTS.invalid.field);
        assert.equal(await p.locator('#event-code-error').isVisible(), true);
        await shot('page-desktop-event-code.png', false, p);
        await stateChecks(p, 'a wrong event code');
        // Typing clears the field's error.
        await p.locator('#event-code').press('End');
        await p.keyboard.type('x');
        assert.equal(await p.locator('#event-code').getAttribute('aria-invalid'), 'false');
        assert.equal(await p.locator('#event-code-error').isVisible(), false);

        // A right code outside its from=/until= dates: the faucet's words.
        const notActive = 'The API token next-year is accepted from 5 Dec 2030 09:00 UTC.';
        await p.locator('#event-code').fill(LATER_CODE);
        const early = p.waitForResponse((r) => new URL(r.url()).pathname === '/faucet/v1/eligibility');
        assert.equal((await dripTo(p, event.reqs, randomTestnetAddress())).txid, '');
        const earlyBody = await (await early).json();
        assert.deepEqual([earlyBody.eligible, earlyBody.reason, earlyBody.message], [false, 'token_not_active', notActive], JSON.stringify(earlyBody));
        assert.equal(await p.locator('#message').textContent(), `${CODE_TEXTS.other.message} ${notActive}`);
        assert.equal(await p.evaluate(() => document.activeElement?.id), 'event-code');
        assert.equal(await p.locator('#event-code-error').textContent(), CODE_TEXTS.other.field);

        // Wrong codes again, by Enter in the field, until the faucet locks
        // the network out (after 5 within 10 minutes).
        await p.locator('#event-code').fill(WRONG_CODE);
        let reason = '';
        let tries = 0;
        while (reason !== 'token_lockout' && tries < 8) {
          tries++;
          const next = p.waitForResponse((r) => new URL(r.url()).pathname === '/faucet/v1/eligibility');
          await p.locator('#event-code').press('Enter');
          reason = (await (await next).json()).reason;
          await p.waitForFunction(() => !document.getElementById('result').hidden, null, { timeout: 10_000 });
        }
        assert.equal(reason, 'token_lockout', `no lock-out after ${tries} wrong codes`);
        assert.equal(await p.locator('#result').getAttribute('data-kind'), 'wait');
        const first = await waitText(p, 'message', new RegExp(`^${escapeRe(CODE_TEXTS.lockout.lead)}${WAIT.source}\\.$`));
        assert.equal(await p.evaluate(() => document.activeElement?.id), 'event-code');
        assert.equal(await p.locator('#event-code-error').textContent(), CODE_TEXTS.lockout.field);
        assert.equal(await p.locator('#submit').isDisabled(), true, 'the lock-out holds the button');
        await p.locator('#event-code').fill(EVENT_CODE);
        assert.equal(await p.locator('#submit').isDisabled(), true, 'a right code too: the faucet would refuse it');
        await p.waitForTimeout(2100);
        assert.notEqual(await p.locator('#message').textContent(), first, 'the countdown does not move');
        const refused = await fetch(`${b}/extended/v1/faucets/stx?address=${randomTestnetAddress()}`, { method: 'POST' });
        assert.deepEqual([refused.status, (await refused.json()).reason], [429, 'token_lockout'], 'the faucet locked the network out');
        assert.ok(event.console.every((t) => !t.includes(WRONG_CODE) && !t.includes(EVENT_CODE)), 'a code in the console');
      } finally {
        await p.close();
        await event.faucet.stop();
      }
    }, { needs: [EVENT_PAID] });

    step('no console errors, page errors or CSP violations', async () => {
      assert.deepEqual(consoleProblems, []);
    }, { needs: [LOADED] });
  });
}
