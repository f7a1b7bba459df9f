// Credentials quoted in free text: a log line, or a provider's error message on its way to a client.
// Providers quote the key they were sent ("Incorrect API key provided: sk-ant-api03-…"), exceptions
// quote headers: the text is scrubbed of anything shaped like an API key (ours, `sk-` and 48
// alphanumerics; Anthropic's `sk-ant-api03-…`; OpenAI's `sk-proj-…`) or a bearer credential, and of
// any credential known by value (a channel's key, whatever its shape).

export const CENSOR = '[redacted]';

const CREDENTIAL_IN_TEXT = /\bsk-[A-Za-z0-9_-]{16,}|(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi;
const BEARER = /bearer/i;

/** Shorter than this a "known credential" is no secret worth a search (and would censor ordinary words). */
const MIN_KNOWN_LENGTH = 8;

export function scrubCredentials(text: string, known?: string): string {
  let out = text;
  if (known !== undefined && known.length >= MIN_KNOWN_LENGTH) {
    out = out.replaceAll(known, CENSOR);
    // As a JSON string holds it (a key with a quote or a backslash in it).
    const escaped = JSON.stringify(known).slice(1, -1);
    if (escaped !== known) out = out.replaceAll(escaped, CENSOR);
  }
  if (!out.includes('sk-') && !out.includes('SK-') && !BEARER.test(out)) return out;
  return out.replace(CREDENTIAL_IN_TEXT, (_m, bearer: string | undefined) => (bearer ? `${bearer}${CENSOR}` : `sk-${CENSOR}`));
}
