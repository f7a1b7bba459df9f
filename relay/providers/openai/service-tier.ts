// OpenAI serves a request that names no service tier, or `auto`, at its project's tier, which the
// project's settings may make Priority (about 2× the standard price: gpt-5 $2.50 / $20 per million
// tokens against $1.25 / $10; developers.openai.com, "Priority processing"). The ratios price the
// standard tier, so a request to OpenAI's own API that asks for none, or auto, is sent `default`:
// served, and billed, at the price it was reserved and is settled at. Other OpenAI-format providers
// have no such tiers, and some refuse fields they do not know: their requests go as the client sent them.

const OPENAI_API_HOST = 'api.openai.com';

/** Whether the channel is OpenAI's own API (its base URL's host). */
export function isOpenAiApi(baseUrl: string): boolean {
  try {
    return new URL(baseUrl).hostname === OPENAI_API_HOST;
  } catch {
    return false;
  }
}

/** Whether a request's `service_tier` leaves the tier to the project's settings. */
export function leavesTierToProject(tier: unknown): boolean {
  return tier === undefined || tier === null || tier === 'auto';
}
