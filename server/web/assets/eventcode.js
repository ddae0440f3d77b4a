// The event code of the faucet page: an API token of the faucet's
// --api-tokens-file that an organiser hands out for a workshop or a
// hackathon, whose room shares one network address and so one per-IP
// limit. The page sends it as "Authorization: Bearer <code>" with the drip
// and with what it asks before the drip; a valid code skips the proof of
// work and the per-IP limit and counts against its own quota. The code
// lives in the field alone: never stored, put in the URL or logged. An ES
// module for the page and Node.

/** CODE_MAX_CHARS is the longest token the faucet accepts. */
export const CODE_MAX_CHARS = 1024;

/**
 * readCode reads what was typed in the field: {code} with surrounding
 * whitespace trimmed ('' when empty), or {code: '', error} when it cannot
 * be a code: spaces inside, or characters an HTTP header cannot carry
 * (fetch would refuse them).
 */
export function readCode(raw) {
  const code = String(raw ?? '').trim();
  if (code === '') return { code: '', error: null };
  if (code.length > CODE_MAX_CHARS) {
    return { code: '', error: `An event code has at most ${CODE_MAX_CHARS.toLocaleString('en-US')} characters: check you copied only the code.` };
  }
  if (/\s/.test(code)) return { code: '', error: 'An event code has no spaces: check you copied it whole, and only it.' };
  if (!/^[\x21-\x7e]+$/.test(code)) {
    return { code: '', error: 'An event code has only letters, digits and plain punctuation: check you copied it exactly.' };
  }
  return { code, error: null };
}

/** authorization is the header that carries code; none without a code. */
export function authorization(code) {
  return code ? { Authorization: `Bearer ${code}` } : {};
}

/**
 * codeRefusal says whether a refusal (its HTTP status and reason; a
 * drip's, or eligibility's with status 200) is about the event code:
 * "lockout" (token_lockout: too many wrong codes from this network; it
 * holds back every drip from it, with a code or without), and with a code
 * "invalid" (token_invalid), or "other": another token_ reason, such as
 * token_not_active for a code outside its dates, or a 401 without a reason
 * (v3 answers carry none); the server's message says why. null when the
 * refusal is not about the code.
 */
export function codeRefusal(status, reason, withCode) {
  if (reason === 'token_lockout') return 'lockout';
  if (!withCode) return null;
  if (reason === 'token_invalid') return 'invalid';
  if (typeof reason === 'string' && reason.startsWith('token_')) return 'other';
  return !reason && status === 401 ? 'other' : null;
}

/**
 * CODE_TEXTS are what the page says of each kind of refusal: in the result
 * (message; lockout: lead, the wait counting down, done when it is over),
 * and by the field (field).
 */
export const CODE_TEXTS = {
  invalid: {
    message: 'The event code was not accepted. Check it with the organiser who gave it to you, or empty the field to ask without a code.',
    field: 'This code was not accepted.',
  },
  other: {
    message: 'The event code cannot be used now.',
    field: 'This code cannot be used now.',
  },
  lockout: {
    lead: 'Too many wrong event codes were tried from your network. Try again in ',
    done: 'You can try again now. Check the event code first: each wrong one makes the wait longer.',
    field: 'Too many wrong codes from your network: wait before trying again.',
  },
};

/** IGNORED_TEXT follows a drip the faucet made without the code: it takes no event codes. */
export const IGNORED_TEXT = 'This faucet takes no event codes, so yours was not used: the drip came under the usual limits.';
