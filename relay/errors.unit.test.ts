// Every failure of the catalogue is documented in the README's relay error table, with its status and
// Anthropic error type, and renders as Anthropic's error JSON.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../infra/project-root.js';
import { RELAY_ERRORS, RelayError, statusLine, type RelayErrorCode } from './errors.js';

const readme = readFileSync(join(projectRoot(), 'README.md'), 'utf8');
const table = readme.slice(readme.indexOf('## Relay errors'));

describe('relay error catalogue', () => {
  for (const code of Object.keys(RELAY_ERRORS) as RelayErrorCode[]) {
    const { status, type } = RELAY_ERRORS[code];
    it(`${code}: ${status} ${type} is in the README table and renders as Anthropic's error JSON`, () => {
      expect(table).toMatch(new RegExp(`\\| ${status} \\| \`${type}\` \\|`));
      const err = new RelayError(code);
      expect(JSON.parse(err.body())).toEqual({ type: 'error', error: { type, message: RELAY_ERRORS[code].message }, request_id: null });
      expect(JSON.parse(err.body('r-1'))).toMatchObject({ request_id: 'r-1' });
      expect(statusLine(status)).toMatch(new RegExp(`^${status} \\S`));
    });
  }
});

describe('OpenAI\'s error JSON of a relay error', () => {
  it('names in `param` the field a request problem names, in OpenAI\'s notation (messages.[0].role)', () => {
    const param = (message: string) => (JSON.parse(new RelayError('invalid_request', message).openaiBody()) as { error: { param: unknown } }).error.param;
    expect(param('messages.0.role: must be one of \'system\', \'user\'')).toBe('messages.[0].role');
    expect(param('temperature: must be at most 2')).toBe('temperature');
    expect(param('messages.2.content.0.image_url.url: required string')).toBe('messages.[2].content.[0].image_url.url');
    expect(param('tools.1: only function tools with a name are supported (custom tools are not: the gateway meters a tool call by its function arguments)')).toBe('tools.[1]');
    // Messages that name no body field: a header, the body as a whole, no field at all.
    expect(param('anthropic-version: the header holds characters HTTP does not allow.')).toBeNull();
    expect(param('invalid request: the body must be a JSON object')).toBeNull();
    expect(param('The request body nests objects and arrays more than 128 levels deep.')).toBeNull();
    expect((JSON.parse(new RelayError('invalid_json').openaiBody()) as { error: { param: unknown } }).error.param).toBeNull();
    // Only a request problem names a field: other errors' messages are not read for one.
    expect((JSON.parse(new RelayError('model_not_found', 'model: none').openaiBody()) as { error: { param: unknown } }).error.param).toBeNull();
    // Given outright, it is kept.
    expect((JSON.parse(new RelayError('invalid_request', 'Bad.', 'n').openaiBody()) as { error: { param: unknown } }).error).toEqual({ message: 'Bad.', type: 'invalid_request_error', param: 'n', code: 'invalid_request' });
  });

  // Before: the relay's own 429 said code rate_limited and its 402 insufficient_balance, where OpenAI
  // (and a provider's error passed on) say rate_limit_exceeded and insufficient_quota.
  it('gives a rate limit and a balance too low OpenAI\'s own codes, as a provider\'s error does', () => {
    const codeOf = (e: RelayError) => (JSON.parse(e.openaiBody()) as { error: { type: string; code: string } }).error;
    expect(codeOf(new RelayError('rate_limited'))).toMatchObject({ type: 'rate_limit_exceeded', code: 'rate_limit_exceeded' });
    expect(codeOf(new RelayError('insufficient_balance'))).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota' });
    expect(codeOf(new RelayError('insufficient_key_quota'))).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota' });
    expect(codeOf(new RelayError('invalid_api_key'))).toMatchObject({ code: 'invalid_api_key' });
  });
});
