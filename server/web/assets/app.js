// The faucet page: live facts from /faucet/v1/info, the choice of asset
// (every asset info lists: STX, the SIP-010 tokens the faucet is configured
// with, BTC on a Bitcoin test network), address validation as the user
// types, the proof of work in a Web Worker, the drip, and the transaction's
// progress; the asset's budget and runway, and sign-in (a session with the
// faucet's OpenID Connect provider, whose tier sets what a drip pays and
// whether it needs the proof of work), and an event code (one of the
// faucet's API tokens, handed out by a workshop's organiser: eventcode.js).
//
// Assets are data: their names, decimals, amounts, limits, states, funding
// and endpoints come from info. The page knows only what the incumbent API
// fixes: STX is the Stacks chain's own coin (stacking drips), BTC is paid on
// a Bitcoin network (its addresses, sizes and links); every other asset is
// a SIP-010 token on Stacks.
//
// Everything the server sends is shown with textContent; no HTML is ever
// built from server data.

import { btcPrefixes, validateBtcAddress } from './btcaddr.js';
import { validateAddress } from './c32.js';
import { authorization, CODE_TEXTS, codeRefusal, IGNORED_TEXT, readCode } from './eventcode.js';
import {
  bitcoinExplorerURL, budgetPeriod, explorerURL, formatAbout, formatAssetAmount, formatLeft, formatSTX, formatTimes, formatWait,
  formatWindow, joinNames, limitSentence,
} from './format.js';

const INFO_URL = 'faucet/v1/info';
const DEFAULT_CHALLENGE_URL = 'faucet/v1/challenge';
const DRIPS_URL = 'faucet/v1/drips/';
const ELIGIBILITY_URL = 'faucet/v1/eligibility';
// The incumbent's two assets that are not SIP-010 tokens on Stacks.
const STX_ID = 'stx';
const BTC_ID = 'btc';

const INFO_INTERVAL_MS = 10_000;
const VALIDATE_DEBOUNCE_MS = 150;
const POLL_FAST_MS = 2_000;
const POLL_SLOW_MS = 5_000;
const POLL_FAST_FOR_MS = 60_000;
const POLL_GIVE_UP_MS = 15 * 60_000;
const UNKNOWN_GIVE_UP_MS = 3 * 60_000;
// A solution is not sent when its challenge expires sooner than this.
const CHALLENGE_MARGIN_MS = 3_000;
const MAX_MESSAGE_CHARS = 400;

const $ = (id) => document.getElementById(id);
const ui = {
  pageHeading: $('page-heading'),
  ledeTokens: $('lede-tokens'),
  ledeBTC: $('lede-btc'),
  btcNetwork: $('btc-network'),
  assetChoice: $('asset-choice'),
  assetOptions: $('asset-options'),
  formHeading: $('form-heading'),
  stackingRow: $('stacking-row'),
  stackingFactRow: $('stacking-fact-row'),
  tokenFactRow: $('token-fact-row'),
  tokenId: $('token-id'),
  apiEndpoint: $('api-endpoint'),
  apiBody: $('api-body'),
  form: $('drip-form'),
  address: $('address'),
  addressLabel: document.querySelector('label[for="address"]'),
  addressHint: $('address-hint'),
  sizeRow: $('size-row'),
  sizeDefault: $('size-default'),
  sizeDefaultAmount: $('size-default-amount'),
  sizeLargeRow: $('size-large-row'),
  sizeLargeAmount: $('size-large-amount'),
  sizeXLargeRow: $('size-xlarge-row'),
  sizeXLargeAmount: $('size-xlarge-amount'),
  tipFactRow: $('tip-fact-row'),
  addressError: $('address-error'),
  stacking: $('stacking'),
  stackingAmount: $('stacking-amount'),
  stackingFact: $('stacking-amount-fact'),
  submit: $('submit'),
  assetNote: $('asset-note'),
  state: $('faucet-state'),
  stateIcon: $('faucet-state').querySelector('.badge-icon'),
  stateText: $('faucet-state').querySelector('.badge-text'),
  stateMessage: $('state-message'),
  tip: $('tip-height'),
  defaultAmount: $('default-amount'),
  limits: $('limits'),
  network: $('network'),
  version: $('server-version'),
  pow: $('pow'),
  powProgress: $('pow-progress'),
  powText: $('pow-text'),
  powCancel: $('pow-cancel'),
  result: $('result'),
  resultHeading: $('result-heading'),
  message: $('message'),
  tx: $('tx'),
  txid: $('txid'),
  copy: $('copy'),
  copyStatus: $('copy-status'),
  txLink: $('tx-link'),
  txLinkText: $('tx-link-text'),
  txState: $('tx-state'),
  balanceFactRow: $('balance-fact-row'),
  balance: $('balance'),
  recent: $('recent'),
  recentList: $('recent-list'),
  recentClear: $('recent-clear'),
  recentStatus: $('recent-status'),
  account: $('account'),
  accountText: $('account-text'),
  signInLink: $('sign-in'),
  signOut: $('sign-out'),
  signInError: $('sign-in-error'),
  accountStatus: $('account-status'),
  budgetFactRow: $('budget-fact-row'),
  budgetLabel: $('budget-label'),
  budget: $('budget'),
  budgetBar: $('budget-bar'),
  shareFactRow: $('share-fact-row'),
  shareLabel: $('share-label'),
  share: $('share'),
  shareBar: $('share-bar'),
  runwayFactRow: $('runway-fact-row'),
  runway: $('runway'),
  budgetNote: $('budget-note'),
  dripAmount: $('drip-amount'),
  resultDetail: $('result-detail'),
  codeBox: $('event-code-box'),
  code: $('event-code'),
  codeError: $('event-code-error'),
};

let info = null; // the last /faucet/v1/info answer
let assets = []; // what the faucet drips, in info's order, STX first (see assetList)
let selected = STX_ID; // the chosen asset's id; not remembered across loads
let chosenByUser = false; // the user picked an asset: never change it for them
let infoFailed = false; // the last /faucet/v1/info read failed
let busy = false; // a drip is being prepared or sent
let lastValidation = validateAddress('');
// Rate-limit waits: "asset|address|stacking" → epoch ms when that kind of
// drip may be asked for again (the server limits each asset, and default
// and stacking STX drips, apart).
const cooldowns = new Map();
let countdownTimer = null;
let pollGeneration = 0; // bumps to abandon an older transaction's polling
let pollTimer = null;

// ---------------------------------------------------------------- helpers

class UserError extends Error {}
class Cancelled extends Error {}
class NetworkError extends Error {}

const NETWORK_MESSAGE = 'Could not reach the faucet. Check your connection and try again.';
const UNREACHABLE_MESSAGE = 'The faucet server is unreachable. Retrying…';

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function clip(s) {
  const t = String(s ?? '').replace(/\s+/g, ' ').trim();
  return t.length > MAX_MESSAGE_CHARS ? t.slice(0, MAX_MESSAGE_CHARS - 1) + '…' : t;
}

/** apiURL resolves a path against the page, refusing other origins. */
function apiURL(path) {
  const u = new URL(path, document.baseURI);
  if (u.origin !== location.origin) throw new UserError('The faucet sent an unusable endpoint.');
  return u;
}

/** request fetches and parses a JSON answer; body is null when it is not JSON. */
async function request(url, options = {}) {
  let resp;
  try {
    resp = await fetch(url, { cache: 'no-store', credentials: 'same-origin', ...options, headers: { Accept: 'application/json', ...options.headers } });
  } catch {
    throw new NetworkError(NETWORK_MESSAGE);
  }
  let body = null;
  if ((resp.headers.get('Content-Type') || '').includes('json')) {
    try {
      body = await resp.json();
    } catch {
      body = null;
    }
  }
  return { status: resp.status, headers: resp.headers, body: body && typeof body === 'object' ? body : null };
}

/** errorText turns a JSON error answer into a sentence; never raw HTML. */
function errorText(res, fallback, { detail = true } = {}) {
  const b = res.body;
  if (b && typeof b.error === 'string' && b.error.trim() !== '') {
    let text = clip(b.error);
    if (detail && typeof b.detail === 'string' && b.detail.trim() !== '') {
      text += (/[.!?]$/.test(text) ? ' ' : ': ') + clip(b.detail);
    }
    return sentence(text);
  }
  return `${fallback} (HTTP ${res.status}).`;
}

/** sentence ends text with a full stop unless it has one. */
function sentence(text) {
  return /[.!?…]$/.test(text) ? text : text + '.';
}

/**
 * ownSentence makes a clause the server wrote to follow another ("the
 * anonymous share … is used up") a sentence of its own: a plain lowercase
 * first word gets its capital (a name in mixed case keeps its own).
 */
function ownSentence(text) {
  return sentence(/^[a-z]+(\s|$)/.test(text) ? text.charAt(0).toUpperCase() + text.slice(1) : text);
}

/** mulPercent is pct percent of base units, rounded down as the server does; null if unusable. */
function mulPercent(base, pct) {
  return base === null ? null : String((BigInt(base) * BigInt(pct)) / 100n);
}

// -------------------------------------------------------------- live facts

const STATES = {
  ready: ['✓', 'Ready'],
  low: ['!', 'Low on funds'],
  // No new Stacks block for a while: drips are still paid but wait for the chain.
  stalled: ['!', 'Chain stalled'],
  empty: ['✕', 'Empty'],
  node_unreachable: ['✕', 'Node unreachable'],
  suspended: ['⏸', 'Suspended'],
  off: ['✕', 'Off'],
  standby: ['⏸', 'Standby'],
  starting: ['…', 'Starting'],
  unavailable: ['✕', 'Unavailable'],
  unreachable: ['✕', 'Server unreachable'],
};

function setState(state, message) {
  const [icon, label] = STATES[state] || ['?', clip(String(state || 'Unknown')).replace(/_/g, ' ')];
  ui.state.dataset.state = state;
  setText(ui.stateIcon, icon);
  setText(ui.stateText, label);
  setText(ui.stateMessage, clip(message));
}

// ------------------------------------------------------------------ assets

const ASSET_ID = /^[a-z][a-z0-9-]{0,31}$/;
const BTC_NETWORK = /^[a-z0-9-]{1,20}$/;

/** isBitcoin: the asset is paid on a Bitcoin network, not on Stacks. */
function isBitcoin(id) {
  return id === BTC_ID;
}

/** baseUnits reads an amount in base units (a whole number or digit string) as a string; null if unusable. */
function baseUnits(v) {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return String(v);
  return typeof v === 'string' && /^\d{1,30}$/.test(v) ? v : null;
}

/** decimalsOf is an asset's decimals, or null when unknown (then amounts are shown in base units). */
function decimalsOf(v) {
  return Number.isInteger(v) && v >= 0 && v <= 30 ? v : null;
}

/** amountText renders base units of asset by its decimals, or as base units when they are unknown. */
function amountText(asset, base) {
  return formatAssetAmount(base, asset.decimals, asset.name);
}

/**
 * endpointOf is an asset's drip path for version ("v1" or "v3") as info
 * gives it, made relative so the page keeps working behind a path prefix;
 * the incumbent's path when info gives none usable.
 */
function endpointOf(endpoints, version, id) {
  const p = endpoints && typeof endpoints === 'object' ? endpoints[version] : null;
  if (typeof p === 'string' && /^\/?extended\/v[13]\/faucets\/[a-z][a-z0-9-]{0,31}$/.test(p)) return p.replace(/^\//, '');
  return `extended/${version}/faucets/${id}`;
}

/**
 * stxAsset is STX from info's top-level fields (which are STX's), for a
 * server whose info has no assets list.
 */
function stxAsset(data) {
  const amounts = data.amounts || {};
  return readAsset({
    asset: STX_ID, name: 'STX', decimals: 6, amount: amounts.default_ustx, limits: data.limits,
    state: data.state, state_message: data.state_message, funding: data.funding,
  }, data);
}

// The Stacks texts of the address field, as the page always had them.
const STACKS_LABEL = 'Your testnet address';
const STACKS_HINT = 'It starts with ST. A contract principal (ST….contract-name) works too.';
const STACKS_BODY = '{"address":"ST…"}';

/** btcSizes reads BTC's larger amounts; null without any usable one. */
function btcSizes(a) {
  const s = a.sizes && typeof a.sizes === 'object' ? a.sizes : {};
  const sizes = { large: baseUnits(s.large), xlarge: baseUnits(s.xlarge) };
  if (sizes.large === '0') sizes.large = null;
  if (sizes.xlarge === '0') sizes.xlarge = null;
  return sizes.large || sizes.xlarge ? sizes : null;
}

/**
 * readAsset reads one entry of info's assets; null when it is unusable
 * (no valid name). An entry without a state of its own shares the
 * faucet's.
 */
function readAsset(a, data) {
  if (!a || typeof a !== 'object' || typeof a.asset !== 'string' || !ASSET_ID.test(a.asset)) return null;
  const id = a.asset;
  const name = (typeof a.name === 'string' ? clip(a.name).slice(0, 24) : '') || id.toUpperCase();
  const stx = id === STX_ID;
  const bitcoin = isBitcoin(id);
  let amount = baseUnits(a.amount);
  let decimals = decimalsOf(a.decimals);
  if (stx) {
    // STX's amount and decimals are fixed by the chain; info's top level has them too.
    amount ??= baseUnits(data.amounts && data.amounts.default_ustx);
    decimals ??= 6;
  }
  return {
    id, name, decimals, amount,
    identifier: typeof a.asset_identifier === 'string' && a.asset_identifier ? clip(a.asset_identifier) : null,
    // Every asset but STX and BTC is a SIP-010 token on Stacks.
    token: !stx && !bitcoin,
    limits: a.limits && typeof a.limits === 'object' ? a.limits : {},
    state: typeof a.state === 'string' && a.state ? a.state : data.state,
    stateMessage: typeof a.state_message === 'string' ? a.state_message : data.state_message,
    // Stacking is STX's alone.
    stacking: stx,
    // BTC is paid on a Bitcoin network: its addresses, sizes and links are its own.
    bitcoin,
    network: bitcoin && typeof a.network === 'string' && BTC_NETWORK.test(a.network) ? a.network : null,
    sizes: bitcoin ? btcSizes(a) : null,
    funding: a.funding && typeof a.funding === 'object' ? a.funding : null,
    budget: readBudget(a.budget),
    // How long the balance lasts at the last hour's outflow; null when nothing flowed out.
    runway: a.runway && typeof a.runway === 'object' && Number.isSafeInteger(a.runway.seconds) && a.runway.seconds >= 0
      ? a.runway.seconds : null,
    v1: endpointOf(a.endpoints, 'v1', id),
    v3: endpointOf(a.endpoints, 'v3', id),
  };
}

/**
 * readBudget reads an asset's outflow budget: at most amount base units
 * paid out in any window of period seconds, left of it now, and the tiers'
 * shares of it; null when it has none (a reserve alone is not shown).
 */
function readBudget(b) {
  if (!b || typeof b !== 'object') return null;
  const amount = baseUnits(b.amount);
  const left = baseUnits(b.left);
  if (amount === null || amount === '0' || left === null || budgetPeriod(b.period_seconds) === null) return null;
  const percent = (v) => Number.isInteger(v) && v >= 0 && v <= 100 ? v : null;
  const shares = [];
  for (const sh of Array.isArray(b.shares) ? b.shares : []) {
    const share = sh && typeof sh === 'object'
      ? { tier: sh.tier, percent: percent(sh.percent), amount: baseUnits(sh.amount), left: baseUnits(sh.left) } : null;
    if (share && typeof share.tier === 'string' && share.percent !== null && share.amount !== null && share.amount !== '0' && share.left !== null) {
      shares.push(share);
    }
  }
  return { amount, left, period: b.period_seconds, scaleBelow: percent(b.scale_below_percent), floor: percent(b.floor_percent), shares };
}

/** assetList reads info's assets in its order (STX first); malformed entries are skipped. */
function assetList(data) {
  const list = [];
  for (const a of Array.isArray(data.assets) ? data.assets : []) {
    const asset = readAsset(a, data);
    if (asset && !list.some((x) => x.id === asset.id)) list.push(asset);
  }
  // A server from before the assets list: STX from the top-level fields.
  if (!list.some((a) => a.id === STX_ID)) list.unshift(stxAsset(data));
  return list;
}

/** unavailable: the faucet lists the asset but cannot drip it now, or its operator turned it off (state_message says why). */
function unavailable(asset) {
  return !infoFailed && (asset.state === 'unavailable' || asset.state === 'off');
}

function currentAsset() {
  // Before info is read: STX, as the page always offered it.
  if (assets.length === 0) assets = assetList({});
  return assets.find((a) => a.id === selected) || assets[0];
}

/**
 * renderChooser shows one radio per asset when there is a choice. The
 * radios are rebuilt only when the list changes, so the 10 s refresh never
 * takes the focus away from them; an asset's "unavailable" note is
 * updated in place.
 */
function renderChooser() {
  const key = assets.map((a) => `${a.id}:${a.name}`).join('|');
  if (ui.assetOptions.dataset.key !== key) {
    ui.assetOptions.dataset.key = key;
    ui.assetOptions.replaceChildren(...assets.map((a) => {
      const label = document.createElement('label');
      label.className = 'segment';
      const radio = document.createElement('input');
      radio.type = 'radio';
      radio.name = 'asset';
      radio.value = a.id;
      radio.id = `asset-${a.id}`;
      radio.addEventListener('change', () => {
        if (!radio.checked) return;
        const wasBitcoin = currentAsset().bitcoin;
        selected = a.id;
        chosenByUser = true;
        renderAsset();
        // Stacks and Bitcoin addresses differ: check the field again.
        if (currentAsset().bitcoin !== wasBitcoin) validateNow();
        updateButton();
      });
      const text = document.createElement('span');
      text.textContent = a.name;
      const note = document.createElement('span');
      note.className = 'segment-note';
      label.append(radio, text, note);
      return label;
    }));
  }
  for (const radio of ui.assetOptions.querySelectorAll('input[type="radio"]')) {
    radio.checked = radio.value === selected;
    const a = assets.find((x) => x.id === radio.value);
    let note = '';
    if (a && a.state === 'off') note = ' (off)';
    else if (a && unavailable(a)) note = ' (unavailable)';
    setText(radio.parentElement.querySelector('.segment-note'), note);
  }
  ui.assetChoice.hidden = assets.length < 2;
  setText(ui.pageHeading, `Get testnet ${joinNames(assets.map((a) => a.name))}`);
  const tokens = assets.filter((a) => a.token).map((a) => a.name);
  ui.ledeTokens.hidden = tokens.length === 0;
  setText(ui.ledeTokens, tokens.length === 1 ? `; testnet ${tokens[0]} is a SIP-010 token on Stacks`
    : `; testnet ${joinNames(tokens, 'and')} are SIP-010 tokens on Stacks`);
  const btc = assets.find((a) => a.bitcoin);
  ui.ledeBTC.hidden = !btc;
  setText(ui.btcNetwork, (btc && btc.network) || 'test network');
}

/** renderAsset shows the chosen asset's amount, limits, state and texts. */
function renderAsset() {
  const data = info || {};
  const a = currentAsset();
  if (infoFailed) {
    // A switch of asset must not show a stale state over this.
    setState('unreachable', UNREACHABLE_MESSAGE);
  } else {
    setState(typeof a.state === 'string' ? a.state : 'unknown', a.stateMessage || '');
  }

  const amounts = data.amounts || {};
  setText(ui.defaultAmount, amountText(a, a.amount) || 'unknown');
  // What the faucet can still pay of this asset, when the server says.
  const fund = a.funding || {};
  const bal = amountText(a, baseUnits(fund.balance));
  ui.balanceFactRow.hidden = bal === null;
  const left = Number.isSafeInteger(fund.drips_left) && fund.drips_left >= 0 ? fund.drips_left : null;
  setText(ui.balance, bal === null ? '' : left === null ? bal
    : `${bal} (${left.toLocaleString('en-US')} drip${left === 1 ? '' : 's'} left)`);
  const stk = formatSTX(amounts.stacking_ustx);
  setText(ui.stackingAmount, stk || 'amount unavailable right now');
  setText(ui.stackingFact, stk || 'unavailable');
  // Stacking is STX's alone; the checkbox keeps its state for the way back.
  ui.stackingRow.hidden = !a.stacking;
  ui.stackingFactRow.hidden = !a.stacking;
  // A token's contract; one the node is to name (in /v2/pox) may not be known yet.
  ui.tokenFactRow.hidden = !a.token;
  setText(ui.tokenId, a.identifier || 'not known yet');

  // An asset the faucet cannot drip now: shown, with why, and not sent.
  const blocked = unavailable(a);
  ui.assetNote.hidden = !blocked;
  setText(ui.assetNote, blocked ? clip(a.stateMessage || `The faucet cannot send ${a.name} right now.`) : '');

  setText(ui.formHeading, `Request ${a.name}`);
  // Without anonymous drips the button leads to the sign-in first.
  setText(ui.submit, signInFirst() ? `Sign in to request ${a.name}` : `Send testnet ${a.name}`);
  setText(ui.apiEndpoint, `POST /${a.v3}`);
  renderAddressTexts(a);
  renderSizes(a);
  // The chain tip is the Stacks chain's: it says nothing of a BTC drip.
  ui.tipFactRow.hidden = a.bitcoin;
  renderBudget(a);
  renderDripAmount(a);

  const limits = a.limits || {};
  const lines = [
    limitSentence(limits.address, ['drip', 'drips', 'address']),
    a.stacking ? limitSentence(limits.stacking, ['stacking drip', 'stacking drips', 'address']) : null,
    limitSentence(limits.ip, ['drip', 'drips', 'IP address']),
  ].filter(Boolean);
  // The server's balance cap is on STX held by a Stacks address.
  const cap = a.bitcoin ? null : formatSTX(data.balance_cap_ustx);
  if (cap) lines.push(`Only for addresses holding less than ${cap}`);
  const old = [...ui.limits.children].map((li) => li.textContent);
  if (old.join('\n') !== lines.map((t) => t + '.').join('\n')) {
    ui.limits.replaceChildren(...lines.map((t) => {
      const li = document.createElement('li');
      li.textContent = t + '.';
      return li;
    }));
  }
}

/**
 * renderBudget shows what is left of a's budget in its window, of the
 * share the visitor's tier draws from (when it has one of its own), that
 * drips are smaller while little is left, and the runway.
 */
function renderBudget(a) {
  const b = a.budget;
  ui.budgetFactRow.hidden = b === null;
  const tier = currentTier();
  // Without anonymous drips a visitor who is not signed in draws from no share.
  const share = b && !signInFirst() && b.shares.find((sh) => sh.tier === tier.name);
  ui.shareFactRow.hidden = !share;
  if (b) {
    setText(ui.budgetLabel, `Budget ${budgetPeriod(b.period)}`);
    setText(ui.budget, formatLeft(b.left, b.amount, a.decimals, a.name) || '');
    setBar(ui.budgetBar, b.left, b.amount, b.scaleBelow);
  }
  if (share) {
    setText(ui.shareLabel, `${tier.name.charAt(0).toUpperCase()}${tier.name.slice(1)} share (${share.percent} %)`);
    setText(ui.share, formatLeft(share.left, share.amount, a.decimals, a.name) || '');
    setBar(ui.shareBar, share.left, share.amount, b.scaleBelow);
  }
  const state = budgetState(a);
  ui.budgetNote.hidden = state === '';
  setText(ui.budgetNote, state === 'out'
    ? `The ${a.name} budget is used up for now: drips resume as the drips of the last ${formatWindow(b.period)} age out.`
    : state === 'low' ? `Little is left of the ${a.name} budget: drips are smaller now, down to ${b.floor} % of a full drip.` : '');

  ui.runwayFactRow.hidden = a.runway === null;
  setText(ui.runway, a.runway === null ? ''
    : a.runway === 0 ? `The faucet's ${a.name} above its reserve is spent.`
      : `At the last hour's rate the faucet's ${a.name} lasts ${formatAbout(a.runway)}.`);
}

/** setBar fills a decorative bar to left/total; data-low below the scale-down point. */
function setBar(bar, left, total, scaleBelow) {
  const permille = Number((BigInt(left) * 1000n) / BigInt(total));
  const width = `${Math.min(1000, permille) / 10}%`;
  if (bar.style.width !== width) bar.style.width = width;
  bar.dataset.low = String(scaleBelow !== null && permille < scaleBelow * 10);
}

/**
 * budgetState is what a's budget pays the visitor now, by what info says
 * is left of its total and of their tier's share: "out" (not even the
 * smallest drip), "low" (below the scale-down point: smaller drips), or
 * "" (full drips, or no budget).
 */
function budgetState(a) {
  const b = a.budget;
  if (!b || b.scaleBelow === null || b.floor === null) return '';
  const tier = currentTier();
  const pools = [b, b.shares.find((sh) => sh.tier === tier.name)].filter(Boolean);
  // The smallest drip the budget still pays: the floor of this visitor's full drip.
  const full = mulPercent(a.amount, tier.percent);
  const floor = full === null ? null : (BigInt(full) * BigInt(b.floor) + 99n) / 100n;
  if (floor !== null && pools.some((p) => BigInt(p.left) < floor)) return 'out';
  return pools.some((p) => BigInt(p.left) * 100n < BigInt(p.amount) * BigInt(b.scaleBelow)) ? 'low' : '';
}

/**
 * renderDripAmount says by the button what a drip pays this visitor: the
 * chosen drip times their tier's percent. Shown where it can differ from
 * "Each drip": with sign-in, a tier's own amount or a budget running low.
 */
function renderDripAmount(a) {
  const tier = currentTier();
  const base = dripBase(a, stackingChosen(a), sizeChosen(a));
  const full = amountText(a, mulPercent(base, tier.percent));
  const state = budgetState(a);
  // Not while the button asks to sign in first: nothing is paid before.
  const show = full !== null && !unavailable(a) && !signInFirst() && (signInInfo() !== null || tier.percent !== 100 || state !== '');
  ui.dripAmount.hidden = !show;
  if (!show) return;
  let text = `Each drip for you: ${full}`;
  if (tier.percent !== 100) text += ` (${tier.name}: ${formatTimes(tier.percent)} the usual ${amountText(a, base)})`;
  if (state === 'low') text += ', less while little is left of the budget';
  if (state === 'out') text += '; none until the budget allows again';
  setText(ui.dripAmount, `${text}.`);
}

/** dripBase is the configured drip of a kind, in base units: the stacking amount, a BTC size, or the asset's drip. */
function dripBase(asset, stacking, size) {
  if (stacking) return baseUnits(info && info.amounts && info.amounts.stacking_ustx);
  return size !== 'default' && asset.sizes ? asset.sizes[size] : asset.amount;
}

/** renderAddressTexts labels the address field for a's chain: a Stacks principal, or a Bitcoin address. */
function renderAddressTexts(a) {
  let placeholder;
  if (a.bitcoin) {
    const net = a.network || 'test network';
    placeholder = `${a.network === 'regtest' ? 'bcrt1' : 'tb1'}…`;
    setText(ui.addressLabel, `Your Bitcoin ${net} address`);
    setText(ui.addressHint, `It starts with ${btcPrefixes(a.network)}. This faucet pays ${net} BTC, not mainnet BTC.`);
    setText(ui.apiBody, `{"address":"${placeholder}"}`);
  } else {
    placeholder = 'ST…';
    setText(ui.addressLabel, STACKS_LABEL);
    setText(ui.addressHint, STACKS_HINT);
    setText(ui.apiBody, STACKS_BODY);
  }
  if (ui.address.placeholder !== placeholder) ui.address.placeholder = placeholder;
}

/** renderSizes offers BTC's sizes; other assets have one amount. */
function renderSizes(a) {
  const sizes = a.bitcoin ? a.sizes : null;
  ui.sizeRow.hidden = sizes === null;
  if (sizes === null) return;
  const fmt = (v) => amountText(a, v);
  setText(ui.sizeDefaultAmount, fmt(a.amount) || 'the usual amount');
  ui.sizeLargeRow.hidden = !sizes.large;
  ui.sizeXLargeRow.hidden = !sizes.xlarge;
  setText(ui.sizeLargeAmount, (sizes.large && fmt(sizes.large)) || '');
  setText(ui.sizeXLargeAmount, (sizes.xlarge && fmt(sizes.xlarge)) || '');
  // A size the faucet stopped offering falls back to the default.
  const chosen = ui.form.querySelector('input[name="size"]:checked');
  if (!chosen || chosen.closest('[hidden]')) ui.sizeDefault.checked = true;
}

/** sizeChosen is "default", "large" or "xlarge" for a drip of asset. */
function sizeChosen(asset) {
  if (!asset.bitcoin || asset.sizes === null) return 'default';
  const chosen = ui.form.querySelector('input[name="size"]:checked');
  const v = chosen ? chosen.value : 'default';
  return (v === 'large' || v === 'xlarge') && asset.sizes[v] ? v : 'default';
}

function renderInfo(data) {
  assets = assetList(data);
  // Sign-in turned on or off since the last read: who the visitor is follows.
  if (signInInfo() === null) session = null;
  else if (session === null) loadSession();
  renderAccount();
  // An asset that was removed falls back to the first; until the user
  // chooses, the page opens on the first asset its operator did not turn off.
  if (!assets.some((a) => a.id === selected)) selected = assets[0].id;
  if (!chosenByUser && currentAsset().state === 'off') selected = (assets.find((a) => a.state !== 'off') || assets[0]).id;
  renderChooser();
  renderAsset();
  // The recent drips' links follow the explorer settings; rebuilt only when
  // those change, so the 10 s refresh never takes the focus from a link.
  const linkMode = `${privateChain()}|${data.explorer_tx_url}`;
  if (linkMode !== recentLinkMode) {
    recentLinkMode = linkMode;
    renderRecent();
  }

  const h = data.chain_tip && Number.isInteger(data.chain_tip.height) ? data.chain_tip.height : null;
  setText(ui.tip, h === null ? 'unknown' : h.toLocaleString('en-US'));

  if (typeof data.network === 'string' && data.network) setText(ui.network, data.network);
  if (typeof data.server_version === 'string') setText(ui.version, clip(data.server_version));
}

let infoTimer = null;
let infoInFlight = false;

async function loadInfo() {
  clearTimeout(infoTimer);
  infoTimer = null;
  if (infoInFlight) return;
  infoInFlight = true;
  try {
    const res = await request(apiURL(INFO_URL));
    if (res.status !== 200 || !res.body) throw new Error('bad info answer');
    info = res.body;
    infoFailed = false;
    renderInfo(info);
    updateButton();
  } catch {
    infoFailed = true;
    renderAsset(); // the state says "unreachable"; no stale note
    updateButton();
    setText(ui.tip, 'unknown');
  } finally {
    infoInFlight = false;
    if (document.visibilityState !== 'hidden') {
      infoTimer = setTimeout(loadInfo, INFO_INTERVAL_MS);
    }
  }
}

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'hidden') {
    clearTimeout(infoTimer);
    infoTimer = null;
  } else if (infoTimer === null) {
    loadInfo();
  }
});

// ----------------------------------------------------------------- sign-in
//
// With info's sign_in enabled, people sign in with the faucet's OpenID
// Connect provider: a link to its login endpoint, which comes back to this
// page with the session in an HttpOnly cookie the page never reads. The
// session endpoint says who is signed in and their tier: what a drip pays
// them, their limit, and whether they skip the proof of work. Same-origin
// fetches carry the cookie; the drip's answer stays the judge.

const ANONYMOUS = 'anonymous';
// The tier of a faucet that names none: the configured drip, the proof of work.
const PLAIN_TIER = { name: ANONYMOUS, percent: 100, limit: null, skipPow: false, match: '' };
const AUTH_PATH = /^\/?faucet\/v1\/auth\/[a-z]{1,20}$/;

let session = null; // {signedIn, name, tier} from the session endpoint; null until read (or without sign-in)
let sessionInFlight = false;

/** authPath is a sign-in endpoint as info gives it, relative to the page; fallback when unusable. */
function authPath(p, fallback) {
  return typeof p === 'string' && AUTH_PATH.test(p) ? p.replace(/^\//, '') : fallback;
}

/** readTier reads a tier of info or the session; null when unusable. */
function readTier(t) {
  if (!t || typeof t !== 'object' || typeof t.name !== 'string' || t.name === '') return null;
  const l = t.limit;
  return {
    name: clip(t.name).slice(0, 32),
    percent: Number.isInteger(t.amount_percent) && t.amount_percent > 0 && t.amount_percent <= 10000 ? t.amount_percent : 100,
    limit: l && Number.isInteger(l.requests) && l.requests > 0 && Number.isInteger(l.window_seconds) && l.window_seconds > 0 ? l : null,
    skipPow: t.skip_proof_of_work === true,
    match: typeof t.match === 'string' ? clip(t.match) : '',
  };
}

/** tiersOf reads info's tiers: the anonymous one and the sign-in ones, in order. */
function tiersOf(data) {
  const s = data && data.sign_in;
  const all = (s && Array.isArray(s.tiers) ? s.tiers : []).map(readTier).filter(Boolean);
  return { anonymous: all.find((t) => t.name === ANONYMOUS) || PLAIN_TIER, signedIn: all.filter((t) => t.name !== ANONYMOUS) };
}

/** signInInfo is info's sign_in when people can sign in here, with its endpoints; null otherwise. */
function signInInfo() {
  const s = info && info.sign_in;
  if (!s || typeof s !== 'object' || s.enabled !== true) return null;
  return {
    login: authPath(s.login, 'faucet/v1/auth/login'),
    logout: authPath(s.logout, 'faucet/v1/auth/logout'),
    session: authPath(s.session, 'faucet/v1/auth/session'),
    anonymous: s.anonymous_drips !== false,
  };
}

function isSignedIn() {
  return session !== null && session.signedIn;
}

/** currentTier is the tier the visitor's drips are served in. */
function currentTier() {
  return (session && session.tier) || tiersOf(info).anonymous;
}

/** proofNeeded: a drip needs the proof of work unless the visitor's tier skips it. */
function proofNeeded() {
  return info !== null && info.challenge && info.challenge.required === true && !(isSignedIn() && currentTier().skipPow);
}

/** signInFirst: this faucet drips to signed-in people only, and the visitor is not signed in. */
function signInFirst() {
  const si = signInInfo();
  // An event code is served without signing in: the button sends it.
  return si !== null && !si.anonymous && session !== null && !isSignedIn() && !codeGiven();
}

/** loginURL starts the sign-in, coming back to this page. */
function loginURL() {
  const u = apiURL(signInInfo().login);
  u.searchParams.set('return', location.pathname);
  return u.href;
}

/** loadSession reads who is signed in, then shows it and what their drips are. */
async function loadSession() {
  const si = signInInfo();
  if (si === null || sessionInFlight) return;
  sessionInFlight = true;
  try {
    const res = await request(apiURL(si.session));
    const b = res.body;
    if (res.status !== 200 || !b) throw new Error('bad session answer');
    session = { signedIn: b.signed_in === true, name: typeof b.name === 'string' ? clip(b.name).slice(0, 120) : '', tier: readTier(b.tier) };
  } catch {
    // Shown as not signed in: the sign-in link works whatever this read says.
    session = { signedIn: false, name: '', tier: null };
  } finally {
    sessionInFlight = false;
  }
  renderAccount();
  renderAsset();
  updateButton();
}

/** tierText says what a tier gets: "2× drips, no proof of work, 20 drips of each asset every day". */
function tierText(t) {
  const parts = [];
  if (t.percent !== 100) parts.push(`${formatTimes(t.percent)} drips`);
  if (t.skipPow) parts.push('no proof of work');
  if (t.limit) {
    const n = t.limit.requests;
    parts.push(`${n} drip${n === 1 ? '' : 's'} ${assets.length > 1 ? 'of each asset ' : ''}every ${formatWindow(t.limit.window_seconds)}`);
  }
  return parts.length > 0 ? parts.join(', ') : 'the usual drips';
}

/** renderAccount shows who is signed in and their tier, or what signing in gives, with the link or button. */
function renderAccount() {
  const si = signInInfo();
  ui.account.hidden = si === null && ui.signInError.hidden;
  if (si === null) return;
  const known = session !== null;
  const signedIn = isSignedIn();
  let text = '';
  if (signedIn) {
    const t = currentTier();
    const who = session.name || 'your account';
    text = t.name === ANONYMOUS
      ? `Signed in as ${who}; your account matches none of this faucet's sign-in tiers, so your drips are as without signing in.`
      : `Signed in as ${who} — ${t.name}: ${tierText(t)}.`;
  } else if (known) {
    const offer = tiersOf(info).signedIn[0];
    const lines = [];
    if (!si.anonymous) lines.push('This faucet drips to signed-in developers only.');
    if (offer) lines.push(`${offer.match ? `Developers ${offer.match}` : 'Signed-in developers'} get ${tierText(offer)}.`);
    text = lines.join(' ');
  }
  setText(ui.accountText, text);
  ui.signInLink.hidden = !known || signedIn;
  ui.signOut.hidden = !signedIn;
  if (known && !signedIn) {
    const href = loginURL();
    if (ui.signInLink.href !== href) ui.signInLink.href = href;
  }
}

ui.signOut.addEventListener('click', async () => {
  const si = signInInfo();
  if (si === null) return;
  ui.signOut.disabled = true;
  let ok = false;
  try {
    const res = await request(apiURL(si.logout), { method: 'POST' });
    ok = res.status >= 200 && res.status < 300;
  } catch {
    ok = false;
  }
  ui.signOut.disabled = false;
  if (!ok) {
    showSignInError('Could not sign out; try again.');
    return;
  }
  ui.signInError.hidden = true;
  session = null;
  await loadSession();
  setText(ui.accountStatus, 'Signed out.');
  // The button is gone: the focus goes to what took its place.
  if (!ui.signInLink.hidden) ui.signInLink.focus();
});

function showSignInError(text) {
  setText(ui.signInError, text);
  ui.signInError.hidden = false;
  ui.account.hidden = false;
}

// Why the provider sent the visitor back without a session (its OAuth
// error code), in words.
const SIGN_IN_ERRORS = {
  access_denied: 'Sign-in was cancelled; you are not signed in.',
  login_required: 'The sign-in provider needs you to log in; sign in again.',
  consent_required: 'The sign-in provider needs your consent; sign in again.',
  interaction_required: 'The sign-in provider needs you to act on its page; sign in again.',
  server_error: 'The sign-in provider had a problem; try signing in again.',
  temporarily_unavailable: 'The sign-in provider is busy; try signing in again shortly.',
};

/**
 * takeSignInError shows a ?sign_in_error= the sign-in came back with and
 * drops it from the address, so a reload or a shared link does not repeat it.
 */
function takeSignInError() {
  const u = new URL(location.href);
  const code = u.searchParams.get('sign_in_error');
  if (code === null) return;
  u.searchParams.delete('sign_in_error');
  history.replaceState(history.state, '', u.pathname + u.search + u.hash);
  const safe = clip(code).replace(/[^A-Za-z0-9_.-]/g, '').slice(0, 64);
  showSignInError(SIGN_IN_ERRORS[code] || `Sign-in did not complete (the provider said “${safe || 'error'}”); try again.`);
}

// Back from another page through the browser's cache: the session may have changed.
window.addEventListener('pageshow', (ev) => {
  if (ev.persisted && signInInfo() !== null) {
    session = null;
    loadSession();
  }
});

// -------------------------------------------------------------- validation

function cooldownKey(asset, address, stacking) {
  // A drip with an event code counts against the code's limits, not the
  // ones that held the address back without it.
  return `${asset.id}|${address}|${stacking ? 'stacking' : 'default'}${codeGiven() ? '|code' : ''}`;
}

/**
 * budgetKey is the wait of an asset's budget for the visitor's tier: it
 * holds every address back, but not a tier with a share of its own (one
 * signs in, and draws from another).
 */
function budgetKey(asset) {
  return `budget|${asset.id}|${currentTier().name}`;
}

/**
 * networkKey is the wait of an asset's per-IP limit: it holds back every
 * address asked for from this network, but not a drip with an event code,
 * which skips that limit.
 */
function networkKey(asset) {
  return `ip|${asset.id}${codeGiven() ? '|code' : ''}`;
}

/** ipLimited reports whether a 429 came from the per-IP limit: its RateLimit field has no request left. */
function ipLimited(res) {
  const field = res.headers.get('RateLimit') || '';
  return field.split(',').some((item) => /^\s*"ip";r=0(;|\s*$)/.test(item));
}

/** stackingChosen is whether a drip of asset would be a stacking drip. */
function stackingChosen(asset) {
  return asset.stacking && ui.stacking.checked;
}

function cooldownLeft(key) {
  const until = cooldowns.get(key);
  if (!until) return 0;
  const left = until - Date.now();
  if (left <= 0) {
    cooldowns.delete(key);
    return 0;
  }
  return left;
}

function updateButton() {
  const v = lastValidation;
  const a = currentAsset();
  if (signInFirst()) {
    // The button leads to the sign-in: no address is needed for that.
    ui.submit.disabled = busy || unavailable(a);
    return;
  }
  ui.submit.disabled = busy || validationPending || !v.ok || unavailable(a) || cooldownLeft(LOCKOUT_KEY) > 0 ||
    cooldownLeft(cooldownKey(a, v.address, stackingChosen(a))) > 0 || cooldownLeft(budgetKey(a)) > 0 || cooldownLeft(networkKey(a)) > 0;
}

/** showValidation reflects a validation result on the field. */
function showValidation(v, { showEmpty = false } = {}) {
  lastValidation = v;
  const show = !v.ok && (v.code !== 'empty' || showEmpty);
  ui.address.setAttribute('aria-invalid', show ? 'true' : 'false');
  setText(ui.addressError, show ? v.message : '');
  ui.addressError.hidden = !show;
  updateButton();
}

/** validateFor checks input as an address asset can be sent to. */
function validateFor(asset, input) {
  return asset.bitcoin ? validateBtcAddress(input, asset.network) : validateAddress(input);
}

function validateNow(opts) {
  clearTimeout(validateTimer);
  validationPending = false;
  const v = validateFor(currentAsset(), ui.address.value);
  showValidation(v, opts);
  return v;
}

let validateTimer = null;
// The field changed and is not checked yet: nothing may enable the button
// (an info refresh, a switch of asset) on the old verdict meanwhile.
let validationPending = false;
ui.address.addEventListener('input', () => {
  clearTimeout(validateTimer);
  // Disable at once while the new value is unchecked; an old verdict must
  // not let a changed address through.
  validationPending = true;
  ui.submit.disabled = true;
  validateTimer = setTimeout(() => validateNow(), VALIDATE_DEBOUNCE_MS);
});
ui.address.addEventListener('blur', () => validateNow());
ui.address.addEventListener('keydown', (ev) => {
  // Enter submits. A disabled default button would block the browser's own
  // implicit submission, so the field handles Enter itself.
  if (ev.key === 'Enter' && !ev.isComposing) {
    ev.preventDefault();
    submit();
  }
});
// What a drip pays follows the kind chosen.
const kindChanged = () => {
  renderDripAmount(currentAsset());
  updateButton();
};
ui.stacking.addEventListener('change', kindChanged);
for (const radio of ui.sizeRow.querySelectorAll('input[name="size"]')) radio.addEventListener('change', kindChanged);
ui.form.addEventListener('submit', (ev) => {
  ev.preventDefault();
  submit();
});

// ----------------------------------------------------------- proof of work

// The challenge is fetched and solved when the user submits, not while they
// type: a solution is only worth its expiry window, most visitors submit the
// first valid address they paste, and the work takes about a second at the
// usual difficulties.

let activeWork = null; // {cancel()} while a proof of work runs

function showPow(pct, text) {
  ui.pow.hidden = false;
  ui.powProgress.value = pct;
  ui.powProgress.setAttribute('aria-valuetext', `${pct}%`);
  setText(ui.powText, text);
}

function hidePow() {
  ui.pow.hidden = true;
}

ui.powCancel.addEventListener('click', () => {
  if (activeWork) activeWork.cancel();
});

/** solvePow runs the worker until it finds a solution; rejects Cancelled. */
function solvePow(token, difficulty) {
  const expected = 2 ** difficulty;
  let lastPct = -1;
  let lastShown = 0;
  const progress = (tried) => {
    const pct = Math.min(99, Math.floor((tried / expected) * 100));
    const now = Date.now();
    // Whole percents at most twice a second, so a screen reader is not flooded.
    if (pct !== lastPct && now - lastShown >= 500) {
      lastPct = pct;
      lastShown = now;
      showPow(pct, `Checking you are not a bot… ${pct}%`);
    }
  };
  showPow(0, 'Checking you are not a bot… 0%');
  ui.powCancel.hidden = false;

  return new Promise((resolve, reject) => {
    let worker = null;
    let stopped = false;
    const finish = () => {
      stopped = true;
      activeWork = null;
      if (worker) worker.terminate();
    };
    activeWork = {
      cancel() {
        if (stopped) return;
        finish();
        reject(new Cancelled('Cancelled.'));
      },
    };
    try {
      worker = new Worker(new URL('./pow-worker.js', import.meta.url), { type: 'module' });
    } catch {
      worker = null;
    }
    if (worker === null) {
      // No module workers: solve on the page in slices.
      solveInPage(token, difficulty, progress, () => stopped).then(
        (solution) => { if (!stopped) { finish(); resolve(solution); } },
        (err) => { if (!stopped) { finish(); reject(err); } },
      );
      return;
    }
    worker.onmessage = (ev) => {
      const m = ev.data || {};
      if (stopped) return;
      if (m.type === 'progress') progress(m.tried);
      else if (m.type === 'solved') {
        finish();
        resolve(m.solution);
      } else if (m.type === 'error') {
        finish();
        reject(new UserError(`The anti-bot check failed: ${clip(m.message)}.`));
      }
    };
    worker.onerror = (ev) => {
      ev.preventDefault();
      if (stopped) return;
      finish();
      reject(new UserError('The anti-bot check could not run in this browser.'));
    };
    worker.postMessage({ type: 'solve', token, difficulty });
  });
}

async function solveInPage(token, difficulty, progress, isStopped) {
  const { solve } = await import('./pow-worker.js');
  const slice = 20_000;
  for (let from = 0; ; from += slice) {
    if (isStopped()) throw new Cancelled('Cancelled.');
    const r = solve(token, difficulty, { from, count: slice });
    if (r) return r.solution;
    progress(from + slice);
    await new Promise((res) => setTimeout(res, 0));
  }
}

/**
 * getProof fetches a challenge (with the event code, if any) and solves it;
 * a challenge that expires first is fetched again.
 */
async function getProof(code) {
  const endpoint = (info && info.challenge && typeof info.challenge.endpoint === 'string' && info.challenge.endpoint) ||
    DEFAULT_CHALLENGE_URL;
  for (let attempt = 0; attempt < 3; attempt++) {
    const res = await request(apiURL(endpoint), { method: 'POST', headers: authorization(code) });
    const c = res.body;
    if (res.status !== 200 && res.status !== 201) {
      throw new UserError(errorText(res, 'The faucet could not start the anti-bot check'));
    }
    if (!c || typeof c.challenge !== 'string' || !Number.isInteger(c.difficulty)) {
      throw new UserError('The faucet sent an unusable anti-bot challenge.');
    }
    if (c.algorithm && c.algorithm !== 'sha256-leading-zero-bits') {
      throw new UserError('The faucet asks for an anti-bot check this page does not know; reload the page.');
    }
    // Timed from when it arrived, by the server's expires_in_seconds: the
    // visitor's clock may be wrong by more than the challenge's lifetime.
    const received = Date.now();
    const solution = await solvePow(c.challenge, c.difficulty);
    const lifeMs = Number.isFinite(c.expires_in_seconds) ? c.expires_in_seconds * 1000 : null;
    if (lifeMs !== null && Date.now() - received > lifeMs - CHALLENGE_MARGIN_MS) continue;
    showPow(100, 'Check complete.');
    ui.powCancel.hidden = true;
    return { token: c.challenge, solution };
  }
  throw new UserError('The anti-bot check took too long and expired. Try again.');
}

// -------------------------------------------------------------- event code
//
// An organiser's code (one of the faucet's API tokens) lifts the per-IP
// limit for a room that shares one address. It is read from the field when
// a drip is asked for and sent as "Authorization: Bearer <code>" with the
// drip, its eligibility question and any challenge; it is kept nowhere
// else (no storage, no URL, no log), so a reload forgets it.

// The lock-out after too many wrong codes holds back every drip from the
// network, with a code or without, and each further code makes it longer.
const LOCKOUT_KEY = 'token-lockout';

/** codeGiven: something is typed in the event code field. */
function codeGiven() {
  return ui.code.value.trim() !== '';
}

/** setCodeError shows text by the event code field; '' clears it. */
function setCodeError(text) {
  ui.code.setAttribute('aria-invalid', text ? 'true' : 'false');
  setText(ui.codeError, text);
  ui.codeError.hidden = text === '';
}

function focusCode() {
  ui.codeBox.open = true;
  ui.code.focus();
}

/**
 * judgeCode asks /faucet/v1/eligibility, with the code, what the drip
 * would meet: it spends nothing (a wrong code counts toward the lock-out
 * as a drip's would, so the drip is then not asked for). It returns the
 * refusal's status and reason, whether the drip needs the proof of work,
 * whether the faucet used the code (its limits then include the code's),
 * or null when the answer is unusable: the drip goes without a proof and
 * a 428 asks for one.
 */
async function judgeCode(asset, address, stacking, size, code) {
  const u = apiURL(ELIGIBILITY_URL);
  u.searchParams.set('asset', asset.id);
  u.searchParams.set('address', address);
  if (stacking) u.searchParams.set('stacking', 'true');
  if (size !== 'default') u.searchParams.set('size', size);
  const res = await request(u, { headers: authorization(code) });
  const b = res.body;
  if (res.status !== 200 || !b || typeof b.eligible !== 'boolean') return null;
  const pow = b.proof_of_work;
  return {
    status: res.status,
    reason: typeof b.reason === 'string' ? b.reason : '',
    message: typeof b.message === 'string' ? b.message : '',
    retryAfter: Number.isFinite(b.retry_after_seconds) && b.retry_after_seconds > 0 ? b.retry_after_seconds : 60,
    eligible: b.eligible,
    proof: Boolean(pow && Number.isInteger(pow.difficulty) && pow.difficulty > 0),
    used: Array.isArray(b.limits) && b.limits.some((l) => l && l.policy === 'token'),
  };
}

/**
 * showCodeRefusal shows a refusal of the code (kind: codeRefusal's) in the
 * result, with the server's message when only it says why, and by the
 * field; the lock-out counts down and holds the button. It reports
 * whether a code was given, whose field then takes the focus.
 */
function showCodeRefusal(kind, message, retryAfter, failed) {
  const t = CODE_TEXTS[kind];
  if (kind === 'lockout') {
    showResult('wait', failed, '');
    startCountdown(LOCKOUT_KEY, retryAfter, t.lead, t.done);
  } else {
    const why = kind === 'other' && typeof message === 'string' && message.trim() !== '' ? ` ${sentence(clip(message))}` : '';
    showResult('error', failed, t.message + why);
  }
  if (!codeGiven()) return false;
  setCodeError(t.field);
  return true;
}

ui.code.addEventListener('input', () => {
  setCodeError('');
  // A code changes the button of a faucet for signed-in people only, and
  // which waits hold it back.
  renderAsset();
  updateButton();
});
ui.code.addEventListener('keydown', (ev) => {
  // Enter submits, as in the address field.
  if (ev.key === 'Enter' && !ev.isComposing) {
    ev.preventDefault();
    submit();
  }
});

// ------------------------------------------------------------------- drip

// Answers after which a fresh challenge is fetched and the drip retried once:
// 428 challenge_required, 400 challenge_expired / challenge_invalid, and
// 403 challenge_replayed (a solution is spent once, even by a failed drip).
const RETRY_REASONS = new Set(['challenge_required', 'challenge_expired', 'challenge_invalid', 'challenge_replayed']);

function needsNewChallenge(res) {
  if (res.status === 428) return true;
  const reason = res.body && res.body.reason;
  return (res.status === 400 || res.status === 403) && RETRY_REASONS.has(reason);
}

/**
 * sendDrip asks for a drip of asset at the endpoints info gives: v1 with the
 * address in the query string (STX's stacking and BTC's sizes are v1's),
 * except BTC's usual drip, which goes to v3 with a JSON body as the
 * incumbent's BTC clients send it. An event code goes in Authorization.
 */
function sendDrip(asset, address, stacking, size, proof, code) {
  const headers = authorization(code);
  if (proof) {
    headers['X-Faucet-Challenge'] = proof.token;
    headers['X-Faucet-Solution'] = proof.solution;
  }
  if (asset.bitcoin && size === 'default') {
    headers['Content-Type'] = 'application/json';
    return request(apiURL(asset.v3), { method: 'POST', headers, body: JSON.stringify({ address }) });
  }
  const u = apiURL(asset.v1);
  u.searchParams.set('address', address);
  // Only STX has stacking drips; the server refuses stacking=true otherwise.
  if (asset.stacking) u.searchParams.set('stacking', stacking ? 'true' : 'false');
  // BTC's larger sizes are v1's.
  if (asset.bitcoin && size !== 'default') u.searchParams.set(size, 'true');
  return request(u, { method: 'POST', headers });
}

const BTC_TXID = /^(?:0x)?([0-9a-fA-F]{64})$/;

/**
 * dripSent reads a successful drip answer, v1's ({success, txId} on Stacks,
 * {success, txid} for BTC) or v3's ({transaction: {tx_id}, amount: {<asset>:
 * base units}}): {txid, amount} (amount in base units, or null when the
 * answer has none), or null when it is not one. A Bitcoin txid is shown as
 * Bitcoin tools print it: 64 hex digits, no 0x.
 */
function dripSent(asset, res) {
  const b = res.body;
  if (res.status !== 200 || !b) return null;
  let txid = null;
  let amount = null;
  if (b.transaction && typeof b.transaction === 'object' && typeof b.transaction.tx_id === 'string') {
    txid = b.transaction.tx_id;
    amount = b.amount && typeof b.amount === 'object' ? baseUnits(b.amount[asset.id]) : null;
  } else if (b.success === true) {
    txid = asset.bitcoin ? b.txid : b.txId;
  }
  if (typeof txid !== 'string' || txid === '') return null;
  if (asset.bitcoin) {
    const m = BTC_TXID.exec(txid);
    return m ? { txid: m[1].toLowerCase(), amount } : null;
  }
  return { txid: clip(txid), amount };
}

function retryAfterSeconds(res) {
  const b = res.body;
  if (b && Number.isFinite(b.retry_after_seconds) && b.retry_after_seconds > 0) return b.retry_after_seconds;
  const h = res.headers.get('Retry-After');
  if (h) {
    if (/^\d+$/.test(h.trim())) return Number(h.trim());
    const at = Date.parse(h);
    if (Number.isFinite(at)) return Math.max(1, (at - Date.now()) / 1000);
  }
  return 60;
}

function showResult(kind, heading, message) {
  ui.result.hidden = false;
  ui.result.dataset.kind = kind;
  setText(ui.resultHeading, heading);
  ui.message.replaceChildren(document.createTextNode(message));
  ui.resultDetail.hidden = true;
}

/** showDetail shows a refusal's detail (which budget share is spent, where to sign in) as a sentence of its own. */
function showDetail(res) {
  const d = res.body && typeof res.body.detail === 'string' ? clip(res.body.detail) : '';
  setText(ui.resultDetail, d ? ownSentence(d) : '');
  ui.resultDetail.hidden = d === '';
}

/**
 * retryAfterGiven: a refusal other than a 429 that says when to try again.
 * Of the drip's refusals only the budget's does: budget_exhausted, or a
 * v3 503 with Retry-After.
 */
function retryAfterGiven(res) {
  const b = res.body;
  if (res.status === 429 || res.status < 400) return false;
  if (b && b.reason === 'budget_exhausted') return true;
  return res.status === 503 && !(b && b.reason) && res.headers.get('Retry-After') !== null;
}

/** paidAmount reads what a drip paid from its status, in base units; null when it does not say. */
async function paidAmount(txid) {
  try {
    const res = await request(apiURL(DRIPS_URL + encodeURIComponent(txid)));
    return res.status === 200 && res.body ? baseUnits(res.body.amount) : null;
  } catch {
    return null;
  }
}

function focusResult() {
  ui.resultHeading.focus();
}

/**
 * startCountdown shows the wait for key in the message: lead, the time
 * left, a full stop; done when it is over.
 */
function startCountdown(key, secs, lead, done) {
  cooldowns.set(key, Date.now() + secs * 1000);
  clearInterval(countdownTimer);
  // The sentence is announced once; the ticking number is not (aria-live off).
  const wait = document.createElement('span');
  wait.setAttribute('aria-live', 'off');
  ui.message.replaceChildren(document.createTextNode(lead), wait, document.createTextNode('.'));
  const tick = () => {
    const left = cooldownLeft(key);
    if (left <= 0) {
      clearInterval(countdownTimer);
      countdownTimer = null;
      ui.message.replaceChildren(document.createTextNode(done));
      updateButton();
      return;
    }
    setText(wait, formatWait(left / 1000));
  };
  tick();
  countdownTimer = setInterval(tick, 1000);
  updateButton();
}

function explorerLink(txid, asset) {
  // The Stacks explorer does not show Bitcoin transactions; regtest has no
  // public explorer at all.
  if (asset.bitcoin) return bitcoinExplorerURL(asset.network, txid);
  if (privateChain()) return null;
  return explorerURL(info && info.explorer_tx_url, txid);
}

/**
 * privateChain: the faucet runs on a chain no public explorer knows. The
 * server says so with devnet: true; a BTC faucet on regtest pairs with a
 * local devnet too (the embedded devnet pays regtest BTC).
 */
function privateChain() {
  if (info && info.devnet === true) return true;
  return assets.some((a) => a.bitcoin && a.network === 'regtest');
}

/**
 * txLinkFor is where a drip's transaction can be followed: the explorer,
 * or, where no public explorer knows it, the faucet's own status JSON.
 */
function txLinkFor(txid, asset) {
  const url = explorerLink(txid, asset);
  if (url) return { url, text: asset.bitcoin ? 'View it on mempool.space' : 'View it in the explorer', explorer: true };
  return { url: apiURL(DRIPS_URL + encodeURIComponent(txid)).href, text: 'Status (JSON)', explorer: false };
}

/** pendingText is what a sent, unconfirmed drip of asset waits for. */
function pendingText(asset) {
  return asset.bitcoin ? 'Pending — waiting for the next Bitcoin block…' : 'Pending — waiting for the next block…';
}

/**
 * showTx shows a sent drip: what it paid (paid, in base units, from the
 * answer or the drip's status; else a full drip of tier), and its
 * transaction.
 */
function showTx(txid, address, asset, tier, base, paid) {
  const full = mulPercent(base, tier.percent);
  const amount = amountText(asset, paid ?? full);
  // A budget (or a treasury below its target) pays less while little is left.
  const less = paid !== null && full !== null && asset.budget !== null && BigInt(paid) < BigInt(full)
    ? ` That is less than a full drip (${amountText(asset, full)}): drips are smaller while little is left of the budget.` : '';
  showResult('success', `${asset.name} on the way`,
    `The faucet sent ${amount || `testnet ${asset.name}`} to ${address}.${less} It arrives when the transaction is in a block.`);
  ui.tx.hidden = false;
  setText(ui.txid, txid);
  setText(ui.copyStatus, '');
  const link = txLinkFor(txid, asset);
  ui.txLink.hidden = false;
  ui.txLink.dataset.kind = link.explorer ? 'explorer' : 'status';
  setText(ui.txLinkText, link.text);
  ui.txLink.href = link.url;
  setTxState('pending', pendingText(asset));
  recentAdd({ asset, address, amount, txid });
}

/**
 * btcConfirmedText says how deep a BTC payout is when its status has no
 * block height (a payout deeper than the faucet's view of the chain): its
 * message counts the confirmations ("Confirmed (2 confirmations).").
 */
function btcConfirmedText(d) {
  const m = d && typeof d.message === 'string' ? /^Confirmed \((\d{1,9}) confirmations?\)/.exec(d.message) : null;
  if (!m) return 'Confirmed.';
  const n = Number(m[1]);
  return `Confirmed (${n} confirmation${n === 1 ? '' : 's'}).`;
}

function setTxState(state, text) {
  ui.txState.dataset.state = state;
  setText(ui.txState, text);
}

async function submit() {
  if (busy) return;
  if (signInFirst()) {
    location.assign(loginURL());
    return;
  }
  const v = validateNow({ showEmpty: true });
  if (!v.ok) {
    ui.address.focus();
    return;
  }
  // A code that cannot be one is said by the field; nothing is sent.
  const { code, error: codeError } = readCode(ui.code.value);
  if (codeError) {
    setCodeError(codeError);
    focusCode();
    return;
  }
  const address = v.address;
  // The drip is of the asset chosen now, whatever is chosen while it runs.
  const asset = currentAsset();
  const stacking = stackingChosen(asset);
  const size = sizeChosen(asset);
  const key = cooldownKey(asset, address, stacking);
  const failed = `No ${asset.name} sent`;
  // The tier the drip is asked in: what a full drip of it is.
  const tier = currentTier();
  // Listed but not dripped now: the note by the button says why.
  if (cooldownLeft(key) > 0 || cooldownLeft(budgetKey(asset)) > 0 || cooldownLeft(networkKey(asset)) > 0 || cooldownLeft(LOCKOUT_KEY) > 0 ||
    unavailable(asset)) return;

  busy = true;
  updateButton();
  stopPolling();
  clearInterval(countdownTimer);
  countdownTimer = null;
  ui.result.hidden = true;
  ui.tx.hidden = true;
  setCodeError('');
  let toCode = false; // the code was refused: the focus goes to its field
  try {
    // With an event code the faucet is asked first whether it takes the
    // code and whether the drip still needs the proof of work (a valid
    // code skips it); a refused code stops here, before any proof.
    const judged = code ? await judgeCode(asset, address, stacking, size, code) : null;
    const refused = judged && codeRefusal(judged.status, judged.reason, true);
    // The faucet took no notice of the code (it has no API tokens).
    let ignored = judged !== null && judged.eligible && !judged.used;
    let res = null;
    if (!refused) {
      // A tier that skips the proof of work sends none; should the session
      // have ended meanwhile, the server asks for one (428) and gets it.
      let proof = (judged ? judged.proof : !code && proofNeeded()) ? await getProof(code) : null;
      res = await sendDrip(asset, address, stacking, size, proof, code);
      if (needsNewChallenge(res)) {
        if (proof === null && isSignedIn()) loadSession();
        // A faucet that took the code would not ask for the proof of work.
        if (proof === null && code) ignored = true;
        proof = await getProof(code);
        res = await sendDrip(asset, address, stacking, size, proof, code);
      }
    }
    hidePow();
    const sent = res && dripSent(asset, res);
    const reason = res && res.body && res.body.reason;
    const codeKind = res && codeRefusal(res.status, reason, code !== '');
    if (refused) {
      toCode = showCodeRefusal(refused, judged.message, judged.retryAfter, failed);
    } else if (sent) {
      // v1's answer has no amount: the drip's status says what it paid.
      const paid = sent.amount ?? await paidAmount(sent.txid);
      showTx(sent.txid, address, asset, tier, dripBase(asset, stacking, size), paid);
      if (ignored) {
        setText(ui.resultDetail, IGNORED_TEXT);
        ui.resultDetail.hidden = false;
      }
      startPolling(sent.txid, asset);
      loadInfo(); // the budget and balance moved
    } else if (codeKind) {
      toCode = showCodeRefusal(codeKind, res.body && res.body.error, retryAfterSeconds(res), failed);
    } else if (res.status === 429) {
      showResult('wait', 'Please wait', '');
      // Name the asset only when there is a choice: its limit is its own.
      const name = assets.length > 1 ? `${asset.name} ` : '';
      if (ipLimited(res)) {
        // The network's limit: every address asked for from here waits.
        startCountdown(networkKey(asset), retryAfterSeconds(res), `Too many ${name}requests from your network. Try again in `,
          'You can ask again now.');
      } else {
        startCountdown(key, retryAfterSeconds(res), `Too many ${name}requests for this address. Try again in `,
          'You can ask for this address again now.');
      }
    } else if (retryAfterGiven(res)) {
      // The budget is used up (v1's reason budget_exhausted; v3 says it
      // with a 503 and Retry-After): every address waits, this tier's.
      showResult('wait', failed, '');
      showDetail(res);
      startCountdown(budgetKey(asset), retryAfterSeconds(res), `${errorText(res, `The faucet could not send ${asset.name}`, { detail: false })} Drips resume in `,
        `The ${asset.name} budget allows drips again: you can ask now.`);
      loadInfo();
    } else {
      showResult('error', failed, errorText(res, `The faucet could not send ${asset.name}`));
      // The asset was turned off or ran dry since the facts were read:
      // show that now (and drop a switched-off asset from the choice). A
      // v3 answer (BTC's default drip) has no reason, only its status.
      if (reason === 'disabled' || reason === 'exhausted' || (!reason && (res.status === 403 || res.status === 503))) loadInfo();
      // Signed out elsewhere, or the session ended: show it.
      if (res.status === 401 && signInInfo() !== null) loadSession();
    }
  } catch (err) {
    hidePow();
    if (err instanceof Cancelled) {
      showResult('info', 'Cancelled', 'Nothing was sent. Submit again when you are ready.');
    } else if (err instanceof UserError || err instanceof NetworkError) {
      showResult('error', failed, err.message);
    } else {
      showResult('error', failed, 'Something went wrong in this page. Reload it and try again.');
    }
  } finally {
    busy = false;
    updateButton();
  }
  if (toCode) focusCode();
  else focusResult();
}
// --------------------------------------------------------- transaction state

function stopPolling() {
  pollGeneration++;
  clearTimeout(pollTimer);
  pollTimer = null;
}

function startPolling(txid, asset) {
  const gen = ++pollGeneration;
  const started = Date.now();
  let unknownSince = null;
  const tick = async () => {
    if (gen !== pollGeneration) return;
    let state = null;
    let d = null;
    try {
      const res = await request(apiURL(DRIPS_URL + encodeURIComponent(txid)));
      if (gen !== pollGeneration) return;
      if (res.status === 200 && res.body) {
        d = res.body;
        state = typeof d.state === 'string' ? d.state : 'unknown';
      } else if (res.status === 404) {
        state = 'unknown';
      }
    } catch {
      if (gen !== pollGeneration) return;
    }
    const now = Date.now();
    if (state) recentSetState(txid, state, d);
    switch (state) {
      case 'confirmed': {
        const h = d && Number.isInteger(d.block_height) ? ` in block ${d.block_height}` : '';
        setTxState('confirmed', asset.bitcoin && !h ? btcConfirmedText(d) : `Confirmed${h}.`);
        loadInfo(); // the tip moved: show it now rather than in up to 10 s
        return;
      }
      case 'failed':
        setTxState('failed', `Failed: ${clip((d && d.message) || 'the transaction was not accepted')}`);
        return;
      case 'pending':
        unknownSince = null;
        // A fee-bumped transfer travels under another txid; the server says which.
        setTxState('pending', d && d.replaced_by && d.message ? clip(d.message) : pendingText(asset));
        break;
      case 'unknown':
        if (unknownSince === null) unknownSince = now;
        if (now - unknownSince > UNKNOWN_GIVE_UP_MS) {
          setTxState('unknown', 'The node still does not know this transaction; it may have been dropped. Check the explorer later.');
          return;
        }
        setTxState('unknown', 'Not known to the node yet…');
        break;
      default:
        setTxState('pending', 'Could not check the transaction just now; retrying…');
    }
    if (now - started > POLL_GIVE_UP_MS) {
      setTxState('pending', 'Still not confirmed after 15 minutes. Follow it in the explorer.');
      return;
    }
    pollTimer = setTimeout(tick, now - started < POLL_FAST_FOR_MS ? POLL_FAST_MS : POLL_SLOW_MS);
  };
  tick();
}

// ------------------------------------------------------------ recent drips
//
// This browser's last drips (RECENT_PER_ASSET of each asset) are kept in
// the browser's local storage and listed under the form with their live state, so a
// reload or a 429 does not lose a txid. Nothing leaves the browser.

const RECENT_KEY = 'faucet.recentDrips.v1';
const RECENT_PER_ASSET = 10;
const RECENT_POLL_MS = 4_000;
const RECENT_STATES = new Set(['pending', 'confirmed', 'failed', 'unknown']);
const RECENT_TXID = /^(?:0x)?[0-9a-fA-F]{64}$/;
let recentTimer = null;
let recentLinkMode = null;

function recentLoad() {
  let list;
  try {
    list = JSON.parse(localStorage.getItem(RECENT_KEY) || '[]');
  } catch {
    return [];
  }
  if (!Array.isArray(list)) return [];
  const str = (v, max) => typeof v === 'string' && v.length <= max ? v : null;
  return list.filter((e) => e && typeof e === 'object' && RECENT_TXID.test(e.txid) && ASSET_ID.test(e.asset)
    && str(e.name, 24) && str(e.address, 300) && Number.isFinite(e.time))
    .map((e) => ({
      asset: e.asset, name: e.name, network: str(e.network, 20), address: e.address, amount: str(e.amount, 60),
      txid: e.txid, time: e.time, state: RECENT_STATES.has(e.state) ? e.state : 'pending', message: str(e.message, MAX_MESSAGE_CHARS),
    }));
}

function recentSave(list) {
  try {
    localStorage.setItem(RECENT_KEY, JSON.stringify(list));
  } catch {
    // Storage off or full: the list lives until the page is closed.
  }
  recentCache = list;
}

let recentCache = recentLoad();

function recentAdd({ asset, address, amount, txid }) {
  const list = recentCache.filter((e) => e.txid !== txid);
  list.unshift({
    asset: asset.id, name: asset.name, network: asset.network, address, amount: amount || null,
    txid, time: Date.now(), state: 'pending', message: null,
  });
  // Keep the newest RECENT_PER_ASSET of each asset.
  const seen = new Map();
  recentSave(list.filter((e) => {
    const n = (seen.get(e.asset) || 0) + 1;
    seen.set(e.asset, n);
    return n <= RECENT_PER_ASSET;
  }));
  renderRecent();
  scheduleRecentPoll();
}

function recentSetState(txid, state, d) {
  const e = recentCache.find((x) => x.txid === txid);
  if (!e || !RECENT_STATES.has(state)) return;
  const message = d && typeof d.message === 'string' ? clip(d.message) : null;
  if (e.state === state && e.message === message) return;
  // A final state stays: a later unknown is a node that forgot, not news.
  if (e.state === 'confirmed' || e.state === 'failed') return;
  e.state = state;
  e.message = message;
  recentSave(recentCache);
  renderRecent();
  if (state === 'confirmed' || state === 'failed') setText(ui.recentStatus, `${e.name} drip to ${e.address}: ${state}.`);
}

function recentStateText(e) {
  switch (e.state) {
    case 'confirmed': return 'Confirmed';
    case 'failed': return e.message ? `Failed: ${e.message}` : 'Failed';
    case 'unknown': return 'Not known to the node';
    default: return 'Pending';
  }
}

function renderRecent() {
  const list = recentCache;
  ui.recent.hidden = list.length === 0;
  ui.recentList.replaceChildren(...list.map((e) => {
    const li = document.createElement('li');
    li.className = 'recent-item';
    li.dataset.txid = e.txid;
    const head = document.createElement('p');
    head.className = 'recent-line';
    const what = document.createElement('strong');
    what.textContent = e.amount || e.name;
    const when = document.createElement('time');
    const at = new Date(e.time);
    when.dateTime = at.toISOString();
    when.textContent = at.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' });
    const state = document.createElement('span');
    state.className = 'recent-state';
    state.dataset.state = e.state;
    state.textContent = recentStateText(e);
    head.append(what, ' · ', state, ' · ', when);
    const to = document.createElement('p');
    to.className = 'recent-line recent-address';
    to.append('to ');
    const addr = document.createElement('code');
    addr.textContent = e.address;
    to.append(addr);
    const tx = document.createElement('p');
    tx.className = 'recent-line';
    const code = document.createElement('code');
    code.className = 'recent-txid';
    code.textContent = e.txid;
    // A drip of an asset the faucet no longer lists keeps its link.
    const asset = assets.find((a) => a.id === e.asset) || { id: e.asset, name: e.name, bitcoin: isBitcoin(e.asset), network: e.network };
    const link = txLinkFor(e.txid, asset);
    const a = document.createElement('a');
    a.href = link.url;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    a.className = 'recent-link';
    a.dataset.kind = link.explorer ? 'explorer' : 'status';
    a.textContent = link.explorer ? 'explorer' : 'status';
    const hidden = document.createElement('span');
    hidden.className = 'visually-hidden';
    hidden.textContent = ` of the ${e.name} drip ${e.txid} (opens in a new tab)`;
    a.append(hidden);
    tx.append(code, ' ', a);
    li.append(head, to, tx);
    return li;
  }));
}

function scheduleRecentPoll() {
  if (recentTimer !== null || document.visibilityState === 'hidden') return;
  recentTimer = setTimeout(pollRecent, RECENT_POLL_MS);
}

/** pollRecent asks for the state of every recent drip not yet final (and not too old). */
async function pollRecent() {
  recentTimer = null;
  const open = recentCache.filter((e) => (e.state === 'pending' || e.state === 'unknown') && Date.now() - e.time < POLL_GIVE_UP_MS);
  for (const e of open) {
    try {
      const res = await request(apiURL(DRIPS_URL + encodeURIComponent(e.txid)));
      if (res.status === 200 && res.body && typeof res.body.state === 'string') recentSetState(e.txid, res.body.state, res.body);
      else if (res.status === 404) recentSetState(e.txid, 'unknown', null);
    } catch {
      // The next round tries again.
    }
  }
  if (recentCache.some((e) => (e.state === 'pending' || e.state === 'unknown') && Date.now() - e.time < POLL_GIVE_UP_MS)) scheduleRecentPoll();
}

ui.recentClear.addEventListener('click', () => {
  recentSave([]);
  renderRecent();
  setText(ui.recentStatus, 'Recent drips cleared.');
  ui.address.focus();
});

// Another tab's drips.
window.addEventListener('storage', (ev) => {
  if (ev.key !== RECENT_KEY && ev.key !== null) return;
  recentCache = recentLoad();
  renderRecent();
  scheduleRecentPoll();
});

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState !== 'hidden') scheduleRecentPoll();
});

// ------------------------------------------------------------------- copy

ui.copy.addEventListener('click', async () => {
  const text = ui.txid.textContent;
  let ok = false;
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch {
      ok = false;
    }
  }
  if (!ok) {
    // Plain http has no async clipboard: select the text and copy it.
    const range = document.createRange();
    range.selectNodeContents(ui.txid);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
  }
  ui.copyStatus.textContent = ok ? 'Copied.' : 'Selected: press Ctrl+C (⌘C) to copy.';
});

// ------------------------------------------------------------------- start

validateNow();
renderRecent();
scheduleRecentPoll();
takeSignInError();
loadInfo();
