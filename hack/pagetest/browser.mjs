// Browser tests: a devnet faucet (the real bin/faucet) and Debian's
// chromium driven by playwright-core.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, constants, mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';

import { chromium } from 'playwright-core';

import { MAINNET_MESSAGE } from '../../server/web/assets/c32.js';
import { randomTestnetAddress } from './validator.mjs';

const POW_DIFFICULTY = 10;
const MAINNET = 'SP3FBR2AGK5H9QBDH3EEN6DF8EK8JY7RX8QJ5SVTE';
// A checksum typo (last character) and a character that never belongs.
const TYPO = 'ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXR';
const BAD_CHARS = 'ST3M7N9Q9HDRM7RV!1Q26P0EE69358PZZAZD7KMXQ';

const LAUNCH_ARGS = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking'];

/** freePort asks the kernel for a free TCP port on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** FaucetProcess runs `faucet serve --devnet` and keeps its last log lines. */
class FaucetProcess {
  constructor(bin, port) {
    this.bin = bin;
    this.port = port;
    this.base = `http://127.0.0.1:${port}`;
    this.lines = [];
    this.proc = null;
    this.exit = null;
  }

  start() {
    const args = ['serve', '--devnet', '--block-time', '3s', '--listen', `127.0.0.1:${this.port}`,
      '--log-format', 'text', '--pow-difficulty', String(POW_DIFFICULTY), '--limit-address', '1/1h'];
    this.command = `${this.bin} ${args.join(' ')}`;
    this.proc = spawn(this.bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk) => {
      for (const line of chunk.toString().split('\n')) {
        if (line.trim()) this.lines.push(line);
      }
      if (this.lines.length > 400) this.lines.splice(0, this.lines.length - 400);
    };
    this.proc.stdout.on('data', keep);
    this.proc.stderr.on('data', keep);
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve();
      });
    });
    this.proc.on('error', (err) => {
      this.exit = { code: null, signal: null, err };
    });
  }

  running() {
    return this.proc !== null && this.exit === null;
  }

  log(n = 60) {
    return this.lines.slice(-n).map((l) => `    | ${l}`).join('\n');
  }

  async waitReady(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    let last = 'no answer';
    while (Date.now() < deadline) {
      if (!this.running()) {
        throw new Error(`the faucet exited early (${JSON.stringify(this.exit)}): ${this.command}\n${this.log()}`);
      }
      try {
        const r = await fetch(`${this.base}/readyz`, { signal: AbortSignal.timeout(2000) });
        last = `HTTP ${r.status}`;
        await r.arrayBuffer();
        if (r.status === 200) return;
      } catch (err) {
        last = err.message;
      }
      await sleep(200);
    }
    throw new Error(`the faucet was not ready within ${timeoutMs / 1000} s (/readyz: ${last})\n${this.log()}`);
  }

  async stop() {
    if (!this.running()) return;
    this.proc.kill('SIGTERM');
    const timedOut = await Promise.race([this.exited.then(() => false), sleep(8000).then(() => true)]);
    if (timedOut && this.running()) {
      this.proc.kill('SIGKILL');
      await this.exited;
    }
  }

  killNow() {
    if (this.running()) this.proc.kill('SIGKILL');
  }
}

/** preflight fails with a clear message when the tools are missing. */
export async function preflight(opts) {
  try {
    await access(opts.faucet, constants.X_OK);
  } catch {
    throw new Error(`no faucet binary at ${opts.faucet}: run make build (or pass --faucet)`);
  }
  try {
    await access(opts.chromium, constants.X_OK);
  } catch {
    throw new Error(`no chromium at ${opts.chromium}: run make chromium (hack/install-chromium.sh) or set CHROMIUM`);
  }
  let help = '';
  try {
    const r = await promisify(execFile)(opts.faucet, ['serve', '--help']);
    help = r.stdout + r.stderr;
  } catch (err) {
    help = `${err.stdout ?? ''}${err.stderr ?? ''}`;
  }
  if (!help.includes('-pow-difficulty')) {
    throw new Error(`${opts.faucet} has no --pow-difficulty flag: it predates the proof of work; rebuild it (make build)`);
  }
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

    process.on('exit', () => faucet?.killNow());
    for (const sig of ['SIGINT', 'SIGTERM']) {
      process.once(sig, () => {
        faucet?.killNow();
        process.exit(130);
      });
    }

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
        if (faucet && !faucet.running()) {
          err.message += `\n  the faucet exited (${JSON.stringify(faucet.exit)}):\n${faucet.log()}`;
        }
        throw err;
      }
    });

    const shot = async (name, fullPage = false) => {
      const file = path.join(opts.out, name);
      await page.screenshot({ path: file, fullPage });
      console.log(`# screenshot ${file}`);
    };

    const typeInto = async (value) => {
      const field = page.locator('#address');
      await field.fill('');
      await field.pressSequentially(value, { delay: 8 });
      // Past the 150 ms debounce.
      await page.waitForTimeout(350);
    };

    const extendedRequests = () => requests.filter((r) => new URL(r.url).pathname.startsWith('/extended/'));

    before(async () => {
      await mkdir(opts.out, { recursive: true });
      faucet = new FaucetProcess(opts.faucet, await freePort());
      base = faucet.base;
      faucet.start();
      await faucet.waitReady(60_000);
      browser = await chromium.launch({
        executablePath: opts.chromium,
        headless: !opts.headed,
        args: opts.headed ? LAUNCH_ARGS.filter((a) => !a.startsWith('--headless')) : LAUNCH_ARGS,
      });
      context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: 'light', reducedMotion: 'reduce' });
      page = await context.newPage();
      page.on('request', async (r) => {
        const entry = { url: r.url(), method: r.method(), headers: {} };
        requests.push(entry);
        try {
          entry.headers = await r.allHeaders();
        } catch {
          // the page moved on
        }
      });
      page.on('console', (m) => {
        if (m.type() !== 'error' && m.type() !== 'warning') return;
        // Chromium logs every 4xx/5xx fetch; those answers are expected here.
        if (/^Failed to load resource: the server responded with a status of/.test(m.text())) return;
        consoleProblems.push(`${m.type()}: ${m.text()}`);
      });
      page.on('pageerror', (err) => consoleProblems.push(`page error: ${err.message}`));
    });

    after(async () => {
      await browser?.close().catch(() => {});
      await faucet?.stop();
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

    step('a valid address, Enter: proof of work, txid, explorer link', async () => {
      address = randomTestnetAddress();
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
      const token = drips[0].headers['x-faucet-challenge'];
      const solution = drips[0].headers['x-faucet-solution'];
      assert.ok(token && /^\d+$/.test(solution || ''), `proof headers: ${JSON.stringify(drips[0].headers)}`);
      const digest = createHash('sha256').update(`${token}:${solution}`).digest();
      const zeros = digest.findIndex((b) => b !== 0) * 8 + Math.clz32(digest[digest.findIndex((b) => b !== 0)]) - 24;
      assert.ok(zeros >= POW_DIFFICULTY, `the solution has ${zeros} zero bits`);

      const link = page.locator('#tx-link');
      assert.equal(await link.isVisible(), true);
      const href = await link.getAttribute('href');
      assert.ok(href.includes('chain=testnet') && href.includes(txid), `explorer link ${href}`);
      assert.equal(await link.getAttribute('target'), '_blank');
      assert.deepEqual((await link.getAttribute('rel')).split(/\s+/).sort(), ['noopener', 'noreferrer']);
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'result-heading', 'focus moves to the result');
      assert.equal(await page.locator('#result').getAttribute('aria-live'), 'polite');
      assert.match(await page.locator('#message').textContent(), new RegExp(address));
    });

    step('the transaction is confirmed after the devnode mines', async () => {
      await page.waitForFunction(() => /^Confirmed in block \d+\.$/.test(document.getElementById('tx-state').textContent), null, { timeout: 30_000 })
        .catch(async (err) => {
          throw new Error(`${err.message}; tx-state says ${JSON.stringify(await page.locator('#tx-state').textContent())}`);
        });
      const polls = requests.filter((r) => new URL(r.url).pathname === `/faucet/v1/drips/${txid}`);
      assert.ok(polls.length >= 1, 'the page never polled the drip status');
    });

    step('360 px wide after the drip: no horizontal scroll, names, contrast; screenshots', async () => {
      await page.setViewportSize({ width: 360, height: 800 });
      await page.locator('#result').scrollIntoViewIfNeeded();
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 360), 'scrollWidth > 360');
        assert.deepEqual(await page.evaluate(a11ySmoke), [], `accessibility smoke (${scheme})`);
        assert.deepEqual(await page.evaluate(contrastProblems), [], `contrast (${scheme}, 360 px)`);
        const suffix = scheme === 'dark' ? '-dark' : '';
        await shot(`page-360${suffix}.png`);
        await shot(`page-360-full${suffix}.png`, true);
      }
      await page.emulateMedia({ colorScheme: 'light' });
      await page.setViewportSize({ width: 1280, height: 900 });
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        assert.deepEqual(await page.evaluate(a11ySmoke), [], `accessibility smoke (${scheme}, desktop)`);
        assert.deepEqual(await page.evaluate(contrastProblems), [], `contrast (${scheme}, desktop)`);
      }
      await page.emulateMedia({ colorScheme: 'light' });
      await shot('page-desktop-result.png', true);
    });

    step('the same address again: 429 with the wait, counting down, button disabled', async () => {
      await page.locator('#address').focus();
      await page.locator('#address').press('Enter');
      const re = /^Too many requests for this address\. Try again in (\d+ h )?(\d+ min)?( ?\d+ s)?\.$/;
      await page.waitForFunction((src) => new RegExp(src).test(document.getElementById('message').textContent), re.source, { timeout: 20_000 })
        .catch(async (err) => {
          throw new Error(`${err.message}; message says ${JSON.stringify(await page.locator('#message').textContent())}`);
        });
      const first = await page.locator('#message').textContent();
      assert.match(first, /Try again in 59 min|Try again in 1 h/, 'about an hour, as --limit-address 1/1h');
      assert.equal(await page.locator('#submit').isDisabled(), true, 'the button stays disabled during the wait');
      await page.waitForTimeout(2100);
      const later = await page.locator('#message').textContent();
      assert.notEqual(later, first, 'the countdown does not move');
      assert.equal(await page.locator('#submit').isDisabled(), true);
      await shot('page-desktop-429.png', true);
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

    step('no console errors, page errors or CSP violations', async () => {
      assert.deepEqual(consoleProblems, []);
    }, { needs: [LOADED] });
  });
}
