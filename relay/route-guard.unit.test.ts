// A route handler that throws is answered, not unwound through uWS's native code: 400 for a malformed
// path (URIError), 500 api_error otherwise, in Anthropic's error JSON; an answer already sent stays.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../infra/logger.js';
import { testConfig } from '../infra/testing/test-config.js';
import { guarded } from './server.js';
import { Reply } from './free-request.js';

const log = createLogger(testConfig(), 'test');

function fakeRes(endedAlready = false) {
  const out = { status: '', headers: {} as Record<string, string>, body: '' };
  let ended = endedAlready;
  const res = {
    cork(fn: () => void) {
      if (ended) throw new Error('Invalid access of discarded or aborted uWS.HttpResponse!');
      fn();
      return res;
    },
    writeStatus(s: string) { out.status = s; return res; },
    writeHeader(k: string, v: string) { out.headers[k] = v; return res; },
    end(b: string) { out.body = b; ended = true; return res; },
    onAborted() { return res; },
  };
  return { res: res as unknown as HttpResponse, out };
}

// No Content-Length: guarded() checks its lines (framing) before the handler runs.
const req = { getHeader: () => '' } as unknown as HttpRequest;

describe('guarded route handlers', () => {
  it('answers a URIError with 400 invalid_request_error', () => {
    const { res, out } = fakeRes();
    guarded(log, 't', () => { decodeURIComponent('%FF'); })(res, req);
    expect(out.status).toMatch(/^400 /);
    expect(JSON.parse(out.body)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
  });

  it('answers any other exception with 500 api_error, without its message', () => {
    const { res, out } = fakeRes();
    guarded(log, 't', () => { throw new Error('secret detail at 10.0.0.7'); })(res, req);
    expect(out.status).toMatch(/^500 /);
    expect(out.headers['content-type']).toBe('application/json');
    const json = JSON.parse(out.body) as { error: { type: string; message: string } };
    expect(json.error.type).toBe('api_error');
    expect(json.error.message).not.toMatch(/10\.0\.0\.7/);
  });

  it('does not throw when the handler had already answered', () => {
    const { res } = fakeRes(true);
    expect(() => guarded(log, 't', () => { throw new TypeError('late'); })(res, req)).not.toThrow();
  });

  it('keeps serving when the handler threw after deferring an answer (Reply): the 500 stands', async () => {
    const { res, out } = fakeRes();
    guarded(log, 't', (r) => { new Reply(r).json(404, '{}'); throw new Error('late'); })(res, req);
    // The deferred write finds the response answered: it must not throw out of its immediate.
    await new Promise((resolve) => setImmediate(resolve));
    expect(out.status).toMatch(/^500 /);
  });
});
