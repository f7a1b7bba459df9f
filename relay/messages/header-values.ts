// Header values the relay forwards (anthropic-version, anthropic-beta) must be ones HTTP allows:
// undici refuses anything else with an exception, which would otherwise look like a provider failure
// and be retried on every channel. Checked before anything else, and answered 400.

/** HTAB, SP, visible ASCII and obs-text (0x80-0xFF): RFC 9110 field-value, as undici checks it. */
export function isHttpFieldValue(v: string): boolean {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f || c > 0xff) return false;
  }
  return true;
}
