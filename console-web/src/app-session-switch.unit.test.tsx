// @vitest-environment happy-dom
// One browser, two tabs: the session is the browser's cookie, so a log out and a log in as another
// account in tab B made tab A, still showing the first account, act as the second (a key created
// under "alice" landed in bob's account, bob's key list under her name). A tab notices the cookie is
// another session's before it sends anything, and reads who is signed in again (review web). And a
// log out that failed left the session alive behind a login page (the error escaped unhandled).
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

vi.mock('./components/usage-chart', () => ({ UsageChart: () => null }));

const ACCOUNTS: Record<string, { id: number; username: string }> = { 'csrf-alice': { id: 7, username: 'alice' }, 'csrf-alice-again': { id: 7, username: 'alice' }, 'csrf-bob': { id: 8, username: 'bob' } };

const server = vi.hoisted(() => {
  const s = { sent: [] as { method: string; path: string; csrf: string | null }[], logout: null as { status: number; message: string } | 'network' | null };
  vi.stubGlobal('fetch', async (r: Request) => {
    const path = new URL(r.url).pathname;
    s.sent.push({ method: r.method, path, csrf: r.headers.get('x-csrf-token') });
    const reply = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    const logout = s.logout;
    if (path === '/api/user/logout' && logout === 'network') throw new TypeError('Failed to fetch');
    if (path === '/api/user/logout' && logout !== null && logout !== 'network') return reply(logout.status, { success: false, message: logout.message });
    if (path === '/api/user/self') {
      const who = (ACCOUNTS as Record<string, { id: number; username: string }>)[r.headers.get('x-csrf-token') ?? ''];
      if (!who) return reply(401, { success: false, message: 'not logged in: send Authorization: Bearer <access token>' });
      return reply(200, { success: true, message: '', data: { id: who.id, username: who.username, display_name: who.username, role: 1, status: 1, email: '', group: 'default',
        quota: 0, used_quota: 0, request_count: 0, aff_code: 'x', aff_count: 0, aff_quota: 0, aff_history_quota: 0 } });
    }
    if (path === '/api/token/' && r.method === 'GET') return reply(200, { success: true, message: '', data: { items: [], total: 0, page: 1, page_size: 10 } });
    return reply(200, { success: true, message: '', data: {} });
  });
  return s;
});

import { App } from './app';

beforeEach(() => {
  document.cookie = 'console_csrf=csrf-alice';
  history.replaceState(null, '', '/profile');
  server.sent.length = 0;
});
afterEach(() => {
  cleanup();
  server.logout = null;
  document.cookie = 'console_csrf=; max-age=0';
});

describe('a tab whose session cookie became another account\'s', () => {
  it('sends nothing under the other session, and shows the account now signed in', async () => {
    render(<App />);
    await screen.findByText(/alice · User/);
    // Tab B logged out and in as bob: the cookie is bob's session now.
    document.cookie = 'console_csrf=csrf-bob';
    server.sent.length = 0;
    fireEvent.input(screen.getByRole('textbox', { name: 'Display name' }), { target: { value: 'Alice L.' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save name' }));
    await screen.findByText(/bob · User/);
    // No write went out with bob's session from the page that showed alice.
    expect(server.sent.filter((c) => c.method !== 'GET')).toEqual([]);
    expect(screen.getByRole('status').textContent).toMatch(/signed in as another account in another tab/);
  });

  it('a log in again as the same account: nothing sent under the new session unseen, no notice of another account, the next try goes', async () => {
    render(<App />);
    await screen.findByText(/alice · User/);
    document.cookie = 'console_csrf=csrf-alice-again';
    server.sent.length = 0;
    fireEvent.input(screen.getByRole('textbox', { name: 'Display name' }), { target: { value: 'Alice L.' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save name' }));
    await waitFor(() => expect(server.sent.some((c) => c.path === '/api/user/self' && c.method === 'GET')).toBe(true));
    expect(server.sent.filter((c) => c.method !== 'GET')).toEqual([]);
    await screen.findByText(/alice · User/);
    expect(screen.queryByText(/signed in as another account in another tab/)).toBeNull();
    await new Promise((r) => setTimeout(r, 20));
    fireEvent.click(screen.getByRole('button', { name: 'Save name' }));
    await waitFor(() => expect(server.sent.filter((c) => c.method !== 'GET')).toEqual([{ method: 'PUT', path: '/api/user/self', csrf: 'csrf-alice-again' }]));
  });

  it('is noticed when the tab is looked at again, before any click', async () => {
    render(<App />);
    await screen.findByText(/alice · User/);
    document.cookie = 'console_csrf=csrf-bob';
    window.dispatchEvent(new Event('focus'));
    await screen.findByText(/bob · User/);
  });
});

describe('Log out', () => {
  it('that could not reach the console stays signed in and says so', async () => {
    server.logout = 'network';
    render(<App />);
    await screen.findByText(/alice · User/);
    fireEvent.click(screen.getByRole('button', { name: 'Log out' }));
    expect((await screen.findByRole('alert')).textContent).toMatch(/could not log out/i);
    expect(screen.getByText(/alice · User/)).toBeTruthy();
    expect(screen.queryByRole('heading', { name: 'Log in' })).toBeNull();
  });

  it('of a session already revoked (401) goes to the login page quietly', async () => {
    server.logout = { status: 401, message: 'access token is invalid, expired or revoked' };
    render(<App />);
    await screen.findByText(/alice · User/);
    const errors: unknown[] = [];
    const onError = (e: PromiseRejectionEvent) => errors.push(e.reason);
    window.addEventListener('unhandledrejection', onError);
    fireEvent.click(screen.getByRole('button', { name: 'Log out' }));
    await screen.findByRole('heading', { name: 'Log in' });
    await waitFor(() => expect(errors).toEqual([]));
    window.removeEventListener('unhandledrejection', onError);
  });
});
