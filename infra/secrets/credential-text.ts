// Credentials quoted in free text: a log line, or a provider's error message on its way to a client.
// Providers quote the key they were sent ("Incorrect API key provided: sk-ant-api03-…"), exceptions
// quote headers: the text is scrubbed of anything shaped like an API key (ours, `sk-` and 48
// alphanumerics; Anthropic's `sk-ant-api03-…`; OpenAI's `sk-proj-…`) or a bearer credential, and of
// any credential known by value (a channel's key, whatever its shape).

export const CENSOR = '[redacted]';

const CREDENTIAL_IN_TEXT = /\bsk-[A-Za-z0-9_-]{16,}|(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi;
const BEARER = /bearer/i;
// `Basic` too: a proxy that quotes the Authorization it was sent gives the key base64-encoded in it.
// Only a token that is the base64 of `user:password` is one (isBasicCredential): "basic
// authentication is not supported" keeps its words.
const BASIC_CREDENTIAL = /(\bbasic\s+)([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])/gi;
const BASIC = /basic/i;

/** Shorter than this a "known credential" is no secret worth a search (and would censor ordinary words). */
const MIN_KNOWN_LENGTH = 8;

export function scrubCredentials(text: string, known?: string): string {
  let out = text;
  if (known !== undefined && known.length >= MIN_KNOWN_LENGTH) {
    out = out.replaceAll(known, CENSOR);
    // As a JSON string holds it (a key with a quote or a backslash in it).
    const escaped = JSON.stringify(known).slice(1, -1);
    if (escaped !== known) out = out.replaceAll(escaped, CENSOR);
    // In another case (a provider that lower-cases what it quotes): a mixed-case key keeps most of its
    // entropy in it. Searched only when the text holds it so, which the error paths alone pay for.
    const lower = known.toLowerCase();
    if (out.toLowerCase().includes(lower)) out = replaceCaseless(out, lower, CENSOR);
  }
  if (BASIC.test(out)) out = out.replace(BASIC_CREDENTIAL, (m, scheme: string, token: string) => (isBasicCredential(token) ? `${scheme}${CENSOR}` : m));
  if (!out.includes('sk-') && !out.includes('SK-') && !BEARER.test(out)) return out;
  return out.replace(CREDENTIAL_IN_TEXT, (_m, bearer: string | undefined) => (bearer ? `${bearer}${CENSOR}` : `sk-${CENSOR}`));
}

/** Whether a token is base64 (written back the same) of `user:password` in printable characters. */
function isBasicCredential(token: string): boolean {
  if (token.length % 4 !== 0) return false;
  const decoded = Buffer.from(token, 'base64');
  if (decoded.toString('base64') !== token) return false;
  const text = decoded.toString('latin1');
  return text.includes(':') && /^[\x20-\x7e]+$/.test(text);
}

/** `text` with every occurrence of `lowerNeedle` in any case replaced (toLowerCase keeps lengths for the key's ASCII). */
function replaceCaseless(text: string, lowerNeedle: string, by: string): string {
  const lower = text.toLowerCase();
  // A character whose lower case is longer (İ) would shift the indexes: then only the exact forms above.
  if (lower.length !== text.length) return text;
  let out = '';
  let from = 0;
  for (let at = lower.indexOf(lowerNeedle); at >= 0; at = lower.indexOf(lowerNeedle, from)) {
    out += text.slice(from, at) + by;
    from = at + lowerNeedle.length;
  }
  return out + text.slice(from);
}
