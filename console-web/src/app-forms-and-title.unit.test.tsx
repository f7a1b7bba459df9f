// @vitest-environment happy-dom
// The window's title names the page shown, on a page loaded signed in too (a payment provider's
// return to /console/topup). A refused login's error does not follow to the Register form, and a
// taken name on Register goes under Username.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';

vi.mock('./components/usage-chart', () => ({ UsageChart: () => null }));

const server = vi.hoisted(() => {
  const s = { signedIn: false };
  vi.stubGlobal('fetch', async (r: Request) => {
    const path = new URL(r.url).pathname;
    const reply = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    if (path === '/api/user/login') return reply(401, { success: false, message: 'username or password is incorrect' });
    if (path === '/api/user/register') return reply(409, { success: false, message: 'username is already taken' });
    if (!s.signedIn) return reply(401, { success: false, message: 'not logged in: send Authorization: Bearer <access token>' });
    if (path === '/api/user/self') {
      return reply(200, { success: true, message: '', data: { id: 7, username: 'ada', display_name: 'Ada', role: 1, status: 1, email: '', group: 'default',
        quota: 0, used_quota: 0, request_count: 0, aff_code: 'x', aff_count: 0, aff_quota: 0, aff_history_quota: 0 } });
    }
    if (path === '/api/user/topup/info') {
      return reply(200, { success: true, message: '', data: { enable_online_topup: false, enable_cardpay_topup: false, enable_redemption: true, pay_methods: [],
        min_topup: 1, cardpay_min_topup: 1, amount_options: [], discount: {}, topup_link: '' } });
    }
    return reply(200, { success: true, message: '', data: { items: [], total: 0, page: 1, page_size: 10 } });
  });
  return s;
});

import { App } from './app';

afterEach(() => {
  cleanup();
  server.signedIn = false;
  document.cookie = 'console_csrf=; max-age=0';
  document.title = 'Gateway console';
});

describe('the window\'s title', () => {
  it('is "Top up · Gateway console" on /console/topup loaded signed in', async () => {
    server.signedIn = true;
    document.cookie = 'console_csrf=csrf-of-the-session';
    history.replaceState(null, '', '/console/topup');
    render(<App />);
    await screen.findByRole('heading', { level: 1, name: 'Top up' });
    await waitFor(() => expect(document.title).toBe('Top up · Gateway console'));
  });

  it('names any page loaded signed in (API keys)', async () => {
    server.signedIn = true;
    document.cookie = 'console_csrf=csrf-of-the-session';
    history.replaceState(null, '', '/keys');
    render(<App />);
    await screen.findByRole('heading', { level: 1, name: 'API keys' });
    await waitFor(() => expect(document.title).toBe('API keys · Gateway console'));
  });
});

describe('log in and register', () => {
  it('a refused login\'s error goes once the Register link is followed', async () => {
    history.replaceState(null, '', '/login');
    render(<App />);
    fireEvent.input(await screen.findByLabelText('Username'), { target: { value: 'ada' } });
    fireEvent.input(screen.getByLabelText('Password'), { target: { value: 'wrong-password' } });
    fireEvent.click(screen.getByRole('button', { name: 'Log in' }));
    await screen.findByText('username or password is incorrect');
    fireEvent.click(screen.getByRole('link', { name: 'Register' }));
    await screen.findByRole('heading', { name: 'Register' });
    expect(screen.queryByText('username or password is incorrect')).toBeNull();
    expect(screen.queryByRole('alert')).toBeNull();
  });

  it('a taken name on Register goes under Username', async () => {
    history.replaceState(null, '', '/register');
    render(<App />);
    const username = await screen.findByLabelText('Username');
    fireEvent.input(username, { target: { value: 'ada' } });
    fireEvent.input(screen.getByLabelText('Password'), { target: { value: 'secret-password1' } });
    fireEvent.input(screen.getByLabelText('Repeat password'), { target: { value: 'secret-password1' } });
    fireEvent.click(screen.getByRole('button', { name: 'Register' }));
    const taken = await screen.findByText('is already taken');
    expect(username.getAttribute('aria-invalid')).toBe('true');
    expect(username.getAttribute('aria-describedby')).toBe(taken.id);
    expect(screen.queryByText('username is already taken')).toBeNull();
  });
});
