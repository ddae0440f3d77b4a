// Text formatting for the faucet page; an ES module for the page and Node.

/**
 * formatAmount renders base units (µSTX, satoshis, a token's smallest
 * unit), a whole number or a decimal string, as "1,234.5 STX" or "0.0001
 * BTC", given the asset's decimals and name; null if unusable. BigInt for
 * the division: the fraction must not go through a float.
 */
export function formatAmount(base, decimals, name) {
  if (typeof base === 'number' && Number.isSafeInteger(base) && base >= 0) base = String(base);
  if (typeof base !== 'string' || !/^\d{1,30}$/.test(base)) return null;
  if (!Number.isInteger(decimals) || decimals < 0 || decimals > 30) return null;
  const v = BigInt(base);
  const unit = 10n ** BigInt(decimals);
  const whole = (v / unit).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const frac = decimals === 0 ? '' : (v % unit).toString().padStart(decimals, '0').replace(/0+$/, '');
  return `${whole}${frac ? '.' + frac : ''} ${name}`;
}

/**
 * formatAssetAmount is formatAmount, or, when the asset's decimals are not
 * known (null: a token whose contract has not answered yet), the base units
 * as they are: "100,000 base units of TOKEN". Null if the amount is unusable.
 */
export function formatAssetAmount(base, decimals, name) {
  if (decimals !== null && decimals !== undefined) return formatAmount(base, decimals, name);
  if (typeof base === 'number' && Number.isSafeInteger(base) && base >= 0) base = String(base);
  if (typeof base !== 'string' || !/^\d{1,30}$/.test(base)) return null;
  const grouped = BigInt(base).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${grouped} base unit${base.replace(/^0+(?=\d)/, '') === '1' ? '' : 's'} of ${name}`;
}

/**
 * formatLeft renders what is left of a budget: "999,500 of 1,000,000 STX
 * left" (base units while the decimals are unknown); null if unusable.
 */
export function formatLeft(left, total, decimals, name) {
  const all = formatAssetAmount(total, decimals, name);
  const part = formatAssetAmount(left, decimals, name);
  if (all === null || part === null) return null;
  // The part without its unit: the total names it once.
  const unit = decimals !== null && decimals !== undefined ? ` ${name}` : / base units? of .*$/.exec(part)[0];
  return `${part.slice(0, part.length - unit.length)} of ${all} left`;
}

/**
 * budgetPeriod words a budget's window for "Budget …": "today" (a day),
 * "this hour", else "per 6 h", "per 30 min"; null if unusable.
 */
export function budgetPeriod(secs) {
  if (!Number.isInteger(secs) || secs <= 0) return null;
  if (secs === 86400) return 'today';
  if (secs === 3600) return 'this hour';
  if (secs % 3600 === 0) return `per ${secs / 3600} h`;
  if (secs % 60 === 0) return `per ${secs / 60} min`;
  return `per ${secs} s`;
}

/**
 * formatAbout renders a long duration in seconds roughly, for the runway:
 * "about 40 minutes", "about 5 hours", "about 3 days", "about 4 months",
 * "about 10 years"; null if unusable.
 */
export function formatAbout(secs) {
  if (!Number.isFinite(secs) || secs < 0) return null;
  const plural = (n, unit) => `about ${n} ${unit}${n === 1 ? '' : 's'}`;
  if (secs < 3600) return plural(Math.max(1, Math.round(secs / 60)), 'minute');
  if (secs < 2 * 86400) return plural(Math.round(secs / 3600), 'hour');
  if (secs < 60 * 86400) return plural(Math.round(secs / 86400), 'day');
  if (secs < 2 * 365 * 86400) return plural(Math.round(secs / (30.44 * 86400)), 'month');
  return plural(Math.round(secs / (365.25 * 86400)), 'year');
}

/** formatTimes renders a percent of the usual drip as a factor: 200 → "2×", 150 → "1.5×"; null if unusable. */
export function formatTimes(percent) {
  if (!Number.isInteger(percent) || percent <= 0) return null;
  return `${String(percent / 100)}×`;
}

/** formatSTX renders µSTX as "1,234.5 STX"; null if unusable. */
export function formatSTX(ustx) {
  return formatAmount(ustx, 6, 'STX');
}

/** formatWindow renders a window in seconds as "5 minutes", "hour", "2 days". */
export function formatWindow(secs) {
  const units = [[86400, 'day'], [3600, 'hour'], [60, 'minute'], [1, 'second']];
  for (const [size, name] of units) {
    if (secs % size === 0) {
      const n = secs / size;
      return n === 1 ? name : `${n} ${name}s`;
    }
  }
  return `${secs} seconds`;
}

/** formatWait renders a wait in seconds as "4 min 12 s", "1 h 5 min" or "12 s". */
export function formatWait(secs) {
  secs = Math.max(0, Math.ceil(secs));
  const h = Math.floor(secs / 3600);
  const m = Math.floor((secs % 3600) / 60);
  const s = secs % 60;
  if (h > 0) return m > 0 ? `${h} h ${m} min` : `${h} h`;
  if (m > 0) return s > 0 ? `${m} min ${s} s` : `${m} min`;
  return `${s} s`;
}

/**
 * limitSentence renders one rate limit of /faucet/v1/info, e.g.
 * {requests: 5, window_seconds: 300} as "5 drips per address every 5
 * minutes"; null when the limit is off or malformed. what is
 * [singular, plural, per].
 */
export function limitSentence(limit, [one, many, per]) {
  if (!limit || !Number.isInteger(limit.requests) || limit.requests <= 0) return null;
  if (!Number.isInteger(limit.window_seconds) || limit.window_seconds <= 0) return null;
  const n = limit.requests;
  return `${n} ${n === 1 ? one : many} per ${per} every ${formatWindow(limit.window_seconds)}`;
}

/**
 * explorerURL fills an explorer template's {txid}; null unless the result
 * is an http(s) URL.
 */
export function explorerURL(template, txid) {
  if (typeof template !== 'string' || !template.includes('{txid}')) return null;
  try {
    const u = new URL(template.split('{txid}').join(encodeURIComponent(txid)));
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.href : null;
  } catch {
    return null;
  }
}

/**
 * bitcoinExplorerURL is a BTC payout's page on mempool.space for signet and
 * testnet; null for regtest (a private chain no explorer knows) and any
 * other network.
 */
export function bitcoinExplorerURL(network, txid) {
  const path = { signet: 'signet', testnet: 'testnet' }[network];
  if (!path || typeof txid !== 'string' || !/^[0-9a-f]{64}$/.test(txid)) return null;
  return `https://mempool.space/${path}/tx/${txid}`;
}

/**
 * joinNames lists names in a sentence: "STX", "STX or BTC", "STX, A or
 * BTC"; conj is the last link ("or", or "and").
 */
export function joinNames(names, conj = 'or') {
  if (names.length <= 2) return names.join(` ${conj} `);
  return `${names.slice(0, -1).join(', ')} ${conj} ${names[names.length - 1]}`;
}
