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

/** RFC 9110's IMF-fixdate, the form an HTTP-date is sent in: `Sun, 06 Nov 1994 08:49:37 GMT`. */
const IMF_FIXDATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/**
 * A provider's retry-after as the client may be given it: delay-seconds or an HTTP-date (RFC 9110
 * 10.2.3), else '' (not passed on). The provider's answer text is replaced on the way to the client;
 * its retry-after carried whatever text it held ("soon, maybe; org-123 db-7").
 */
export function retryAfterOf(v: string): string {
  return /^\d{1,10}$/.test(v) || (IMF_FIXDATE.test(v) && !Number.isNaN(Date.parse(v))) ? v : '';
}
