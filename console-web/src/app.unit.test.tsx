// @vitest-environment happy-dom
// The shell against a stubbed fetch: signed out shows the login form; logging in asks for the cookie
// session; every call carries the session's CSRF token; administration is listed only for role >= 10.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

// uPlot needs a canvas and matchMedia; the chart is not what these tests look at.
vi.mock('./components/usage-chart', () => ({ UsageChart: () => null }));

interface Seen { method: string; path: string; headers: Headers; body: string }
const seen: Seen[] = [];
let signedIn = false;
let role = 1;
let banned = false;

const account = () => ({
  id: 7, username: 'ada', display_name: 'Ada', role, status: 1, email: '', code_host_id: '', chat_platform_id: '', oidc_id: '',
  social_app_id: '', messenger_id: '', forum_id: '', group: 'default', quota: 1_000_000, used_quota: 250_000, request_count: 3,
  aff_code: 'x', aff_count: 0, aff_quota: 0, aff_history_quota: 0, inviter_id: 0, setting: '', card_provider_customer: '',
  sidebar_modules: '', permissions: {},
});

function answer(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

beforeAll(() => {
  vi.stubGlobal('fetch', async (input: Request) => {
    const url = new URL(input.url);
    seen.push({ method: input.method, path: url.pathname, headers: input.headers, body: input.method === 'GET' ? '' : await input.clone().text() });
    if (url.pathname === '/api/user/login') {
      signedIn = true;
      document.cookie = 'console_csrf=csrf-of-the-session';
      return answer(200, { success: true, message: '', data: { ...account(), token: '' } });
    }
    if (!signedIn) return answer(401, { success: false, message: 'not logged in' });
    if (banned) return answer(403, { success: false, message: 'this account is banned' });
    if (url.pathname === '/api/user/self') return answer(200, { success: true, message: '', data: account() });
    if (url.pathname === '/api/log/self/daily') {
      // Today's entry, as the API dates it: the local midnight by the offset asked for.
      const offsetSec = Number(url.searchParams.get('utc_offset')) * 60;
      const day = Math.floor((Date.now() / 1000 + offsetSec) / 86_400) * 86_400 - offsetSec;
      return answer(200, { success: true, message: '', data: [{ day, requests: 2, quota: 500, prompt_tokens: 1, completion_tokens: 1 }] });
    }
    if (url.pathname === '/api/log/self/stat') return answer(200, { success: true, message: '', data: { quota: 0, rpm: 0, tpm: 0 } });
    return answer(404, { success: false, message: 'no such endpoint' });
  });
});

afterEach(() => {
  cleanup();
  seen.length = 0;
});

describe('App', () => {
  it('shows the login form when signed out, logs in with the cookie session, then sends the CSRF token', async () => {
    const { App } = await import('./app');
    render(<App />);
    await screen.findByRole('button', { name: 'Log in' });
    fireEvent.input(screen.getByLabelText('Username'), { target: { value: 'ada' } });
    fireEvent.input(screen.getByLabelText('Password'), { target: { value: 'secret-password' } });
    fireEvent.click(screen.getByRole('button', { name: 'Log in' }));
    await screen.findByRole('button', { name: 'Log out' });

    const login = seen.find((s) => s.path === '/api/user/login')!;
    expect(login.headers.get('x-console-session')).toBe('cookie');
    expect(JSON.parse(login.body)).toEqual({ username: 'ada', password: 'secret-password' });
    const after = seen.filter((s) => s.path !== '/api/user/login' && seen.indexOf(s) > seen.indexOf(login));
    expect(after.length).toBeGreaterThan(0);
    for (const s of after) expect(s.headers.get('x-csrf-token'), s.path).toBe('csrf-of-the-session');
    // The dashboard's figures come from the account and the daily endpoint.
    await waitFor(() => expect(screen.getByRole('group', { name: "Today's requests" }).textContent).toContain('2'));
    expect(screen.getByRole('group', { name: 'Balance' }).textContent).toContain('$2.00');
    expect(screen.queryByText('Administration')).toBeNull();
  });

  it('lists administration for role >= 10 only', async () => {
    role = 10;
    const { App } = await import('./app');
    render(<App />);
    await screen.findByText('Administration');
    expect(screen.getByRole('link', { name: 'Channels' }).getAttribute('href')).toBe('/admin/channels');
  });

  it('an account banned under an open page lands on the login page, which says it is banned', async () => {
    role = 1;
    const { App } = await import('./app');
    render(<App />);
    await screen.findByRole('button', { name: 'Log out' });
    banned = true;
    fireEvent.click(screen.getByRole('link', { name: 'API keys' }));
    await screen.findByRole('button', { name: 'Log in' });
    expect(screen.getByRole('status').textContent).toBe('You were signed out: this account is banned. Ask an administrator if you think this is a mistake.');
  });
});
