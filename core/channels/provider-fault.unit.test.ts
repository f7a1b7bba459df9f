import { describe, expect, it } from 'vitest';
import { classifyProviderError, isRetriedFault } from './provider-fault.js';

const anthropic = (type: string, message: string) => JSON.stringify({ type: 'error', error: { type, message } });

describe('classifyProviderError', () => {
  it('a revoked or forbidden credential is the channel\'s fault', () => {
    expect(classifyProviderError(401, anthropic('authentication_error', 'invalid x-api-key'))).toBe('channel');
    expect(classifyProviderError(403, anthropic('permission_error', 'Your API key does not have permission'))).toBe('channel');
    expect(classifyProviderError(402, '')).toBe('channel');
  });

  it('an account that cannot pay is the channel\'s fault, whatever status carries it', () => {
    expect(classifyProviderError(400, anthropic('invalid_request_error', 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.'))).toBe('channel');
    expect(classifyProviderError(429, JSON.stringify({ error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', code: 'insufficient_quota' } }))).toBe('channel');
  });

  // Before: 'client', so a channel whose base URL redirects was neither counted nor passed over.
  it('a 1xx or 3xx (a moved base URL, a login page) is the channel\'s fault', () => {
    for (const status of [101, 103, 300, 301, 302, 307, 308]) expect(classifyProviderError(status, '<a href="/login">moved</a>')).toBe('channel');
  });

  it('the client\'s own bad request is not', () => {
    expect(classifyProviderError(400, anthropic('invalid_request_error', 'max_tokens: Field required'))).toBe('client');
    expect(classifyProviderError(404, anthropic('not_found_error', 'model: claude-x'))).toBe('client');
    expect(classifyProviderError(413, anthropic('request_too_large', 'Request exceeds the maximum size'))).toBe('client');
    expect(isRetriedFault('client')).toBe(false);
  });

  it('rate limits, overload and server errors keep their classes and are retried', () => {
    expect(classifyProviderError(429, anthropic('rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit'))).toBe('rate_limit');
    expect(classifyProviderError(529, anthropic('overloaded_error', 'Overloaded'))).toBe('overloaded');
    expect(classifyProviderError(500, anthropic('api_error', 'Internal server error'))).toBe('server');
    expect(classifyProviderError(503, '<html>bad gateway</html>')).toBe('server');
    for (const f of ['channel', 'rate_limit', 'overloaded', 'server'] as const) expect(isRetriedFault(f)).toBe(true);
  });

  it('never takes the client\'s own text, quoted back in an error, for the account\'s trouble', () => {
    // Anthropic repeats a tool_use id the client chose; a client naming it so must not be able to
    // take every channel out of the rotation with requests that cost it nothing.
    for (const id of ['insufficient_quota', 'credit balance is too low', 'account_suspended', 'payment required']) {
      const quoted = anthropic('invalid_request_error', `messages.1: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${id}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`);
      expect(classifyProviderError(400, quoted), id).toBe('client');
      expect(classifyProviderError(404, anthropic('not_found_error', `model: ${id}`)), id).toBe('client');
      expect(classifyProviderError(400, JSON.stringify({ error: { message: `Invalid value for 'model': ${id}`, type: 'invalid_request_error', code: 'model_not_found' } })), id).toBe('client');
    }
    expect(classifyProviderError(429, anthropic('rate_limit_error', 'This request would exceed your organization\'s rate limit of 1,000,000 input tokens per minute (model: insufficient_quota)'))).toBe('rate_limit');
  });

  it('knows the account\'s trouble by the provider\'s own code or by a message that starts with it', () => {
    expect(classifyProviderError(400, JSON.stringify({ error: { message: 'quota', type: 'insufficient_quota' } }))).toBe('channel');
    expect(classifyProviderError(429, JSON.stringify({ error: { message: 'x', code: 'insufficient_quota', type: 'requests' } }))).toBe('channel');
    expect(classifyProviderError(400, JSON.stringify({ error: { message: 'Billing hard limit has been reached', type: 'invalid_request_error', code: 'billing_hard_limit_reached' } }))).toBe('channel');
    expect(classifyProviderError(400, anthropic('billing_error', 'This organization cannot make requests'))).toBe('channel');
    expect(classifyProviderError(400, JSON.stringify({ error: { message: 'Your organization org-abc123 has been disabled.', type: 'invalid_request_error' } }))).toBe('channel');
    expect(classifyProviderError(400, JSON.stringify({ message: 'Insufficient balance' }))).toBe('channel');
    expect(classifyProviderError(400, 'Your account has been suspended.')).toBe('channel');
  });

  it('looks only at the start of a huge body', () => {
    const huge = 'x'.repeat(10_000) + 'credit balance is too low';
    expect(classifyProviderError(400, huge)).toBe('client');
  });
});
