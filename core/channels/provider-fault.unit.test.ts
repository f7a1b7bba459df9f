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

  it('looks only at the start of a huge body', () => {
    const huge = 'x'.repeat(10_000) + 'credit balance is too low';
    expect(classifyProviderError(400, huge)).toBe('client');
  });
});
