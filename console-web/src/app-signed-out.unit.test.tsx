// @vitest-environment happy-dom
// A start without a session asks the API nothing that could be refused (only the public GET
// /api/status, what the login page offers): GET /api/user/self could only be refused, and the
// browser would log that 401 as an error. With the session's CSRF cookie, it asks who is signed in.
import { cleanup, render, screen } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';

vi.mock('./components/usage-chart', () => ({ UsageChart: () => null }));

const asked = vi.hoisted(() => {
  const paths: string[] = [];
  vi.stubGlobal('fetch', async (r: Request) => {
    const path = new URL(r.url).pathname;
    paths.push(path);
    const account = { id: 7, username: 'ada', display_name: 'Ada', role: 1, status: 1, group: 'default', quota: 0, used_quota: 0, request_count: 0 };
    const signedIn = (r.headers.get('x-csrf-token') ?? '') !== '' || path === '/api/status';
    const body = path === '/api/status' ? { success: true, message: '', data: { register_enabled: true, password_register_enabled: true } }
      : !signedIn ? { success: false, message: 'not logged in' }
      : path === '/api/user/self' ? { success: true, message: '', data: account }
      : { success: true, message: '', data: [] };
    return new Response(JSON.stringify(body), { status: signedIn ? 200 : 401, headers: { 'content-type': 'application/json' } });
  });
  return paths;
});

import { maybeSignedIn } from './api/client';
import { App } from './app';

afterEach(() => {
  cleanup();
  asked.length = 0;
  document.cookie = 'console_csrf=; max-age=0';
});

describe('the start of the console', () => {
  it('without a session cookie shows the login form and sends no request but the public status', async () => {
    render(<App />);
    await screen.findByRole('button', { name: 'Log in' });
    await new Promise((r) => setTimeout(r, 20));
    expect(asked).toEqual(['/api/status']);
  });

  it('with the session\'s CSRF cookie asks who is signed in', async () => {
    document.cookie = 'console_csrf=csrf-of-the-session';
    render(<App />);
    await screen.findByRole('button', { name: 'Log out' });
    expect(asked[0]).toBe('/api/user/self');
  });

  it('reads the CSRF cookie among others', () => {
    expect(maybeSignedIn('')).toBe(false);
    expect(maybeSignedIn('a=1; console_csrf=x; b=2')).toBe(true);
    expect(maybeSignedIn('console_csrf=')).toBe(false);
    expect(maybeSignedIn('not_console_csrf=x')).toBe(false);
  });
});
