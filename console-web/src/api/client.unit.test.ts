// @vitest-environment happy-dom
// The CSRF cookie the client sends back: console-api names it `__Host-console_csrf` when the console is
// served over HTTPS and `console_csrf` over plain HTTP. The client reads either, the `__Host-` one
// first: over HTTPS an unprefixed cookie beside it may be stale or planted by another origin.
import { afterEach, describe, expect, it, vi } from 'vitest';

const sent = vi.hoisted(() => {
  const headers: Headers[] = [];
  vi.stubGlobal('fetch', async (r: Request) => {
    headers.push(r.headers);
    return new Response(JSON.stringify({ success: true, message: '', data: {} }), { status: 200, headers: { 'content-type': 'application/json' } });
  });
  return headers;
});

import { api, csrfToken, maybeSignedIn } from './client';

afterEach(() => {
  vi.restoreAllMocks();
  sent.length = 0;
});

describe('the CSRF cookie', () => {
  it('is read under the __Host- name (HTTPS) and the plain name (HTTP)', () => {
    expect(csrfToken('a=1; __Host-console_csrf=x%3Dy; b=2')).toBe('x=y');
    expect(csrfToken('a=1; console_csrf=plain; b=2')).toBe('plain');
    expect(maybeSignedIn('__Host-console_csrf=t')).toBe(true);
    expect(maybeSignedIn('console_csrf=t')).toBe(true);
    expect(csrfToken('a=1')).toBeUndefined();
    expect(maybeSignedIn('__Host-console_csrf=')).toBe(false);
    expect(maybeSignedIn('__Secure-console_csrf=t; __host-console_csrf=t')).toBe(false);
  });

  it('prefers the __Host- cookie to an unprefixed one beside it, in either order', () => {
    expect(csrfToken('console_csrf=planted; __Host-console_csrf=mine')).toBe('mine');
    expect(csrfToken('__Host-console_csrf=mine; console_csrf=planted')).toBe('mine');
    // An empty __Host- value is no token: the plain one is used.
    expect(csrfToken('__Host-console_csrf=; console_csrf=plain')).toBe('plain');
  });

  it('every request carries the __Host- cookie\'s token as X-CSRF-Token', async () => {
    vi.spyOn(document, 'cookie', 'get').mockReturnValue('console_csrf=planted; __Host-console_csrf=mine');
    await api.GET('/api/user/self');
    expect(sent[0]!.get('x-csrf-token')).toBe('mine');
    vi.spyOn(document, 'cookie', 'get').mockReturnValue('console_csrf=plain');
    await api.GET('/api/user/self');
    expect(sent[1]!.get('x-csrf-token')).toBe('plain');
    expect(sent[1]!.get('x-console-session')).toBe('cookie');
  });
});
