// @vitest-environment happy-dom
// A write whose answer says the session is gone goes to the login page, which says the session
// expired, as every other call does: Profile's name and password forms included, though a wrong
// current password (also 401) stays an error of its field. A write refused for want of the session's
// CSRF token (403) is the same: no write of the page can succeed any more.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

vi.mock('./components/usage-chart', () => ({ UsageChart: () => null }));

const UNAUTHENTICATED = 'not logged in: send Authorization: Bearer <access token>';
const INVALID_ACCESS_TOKEN = 'access token is invalid, expired or revoked';
const CSRF = 'a write authenticated by the session cookie needs the X-CSRF-Token header of that session';
const EXPIRED = 'Your session expired; log in again.';

// What the next write (PUT, POST, DELETE) is answered with.
const server = vi.hoisted(() => {
  const s: { write: { status: number; message: string } | null } = { write: null };
  vi.stubGlobal('fetch', async (r: Request) => {
    const path = new URL(r.url).pathname;
    const reply = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    if (r.method !== 'GET' && s.write) return reply(s.write.status, { success: false, message: s.write.message });
    if (path === '/api/user/self') {
      return reply(200, { success: true, message: '', data: { id: 7, username: 'ada', display_name: 'Ada', role: 1, status: 1, email: '', group: 'default',
        quota: 0, used_quota: 0, request_count: 0, aff_code: 'x', aff_count: 0, aff_quota: 500_000, aff_history_quota: 0 } });
    }
    return reply(200, { success: true, message: '', data: { revoked: 0 } });
  });
  return s;
});

import { App } from './app';

beforeEach(() => {
  document.cookie = 'console_csrf=csrf-of-the-session';
  history.replaceState(null, '', '/profile');
});
afterEach(() => {
  cleanup();
  server.write = null;
  document.cookie = 'console_csrf=; max-age=0';
});

async function saveName() {
  render(<App />);
  fireEvent.input(await screen.findByRole('textbox', { name: 'Display name' }), { target: { value: 'Ada L.' } });
  fireEvent.click(screen.getByRole('button', { name: 'Save name' }));
}

async function changePassword() {
  render(<App />);
  fireEvent.input(await screen.findByLabelText('Current password'), { target: { value: 'old-password-1' } });
  fireEvent.input(screen.getByLabelText('New password'), { target: { value: 'new-password-1' } });
  fireEvent.input(screen.getByLabelText('New password again'), { target: { value: 'new-password-1' } });
  fireEvent.click(screen.getByRole('button', { name: 'Change password' }));
}

async function expectLoginPageSayingExpired() {
  await screen.findByRole('heading', { name: 'Log in' });
  expect(screen.getByRole('status').textContent).toBe(EXPIRED);
  expect(screen.queryByText(UNAUTHENTICATED)).toBeNull();
  expect(screen.queryByText(CSRF)).toBeNull();
  // The path stays: logging in again returns to Profile.
  expect(location.pathname).toBe('/profile');
}

describe('Profile with an ended session', () => {
  it('"Save name" answered 401 UNAUTHENTICATED (cookie gone, logged out in another tab) goes to the login page', async () => {
    server.write = { status: 401, message: UNAUTHENTICATED };
    await saveName();
    await expectLoginPageSayingExpired();
  });

  it('"Change password" answered 401 INVALID_ACCESS_TOKEN (session expired or revoked) goes to the login page', async () => {
    server.write = { status: 401, message: INVALID_ACCESS_TOKEN };
    await changePassword();
    await expectLoginPageSayingExpired();
  });

  it('a wrong current password (401 INVALID_CREDENTIALS) stays an error of its field, signed in', async () => {
    server.write = { status: 401, message: 'original_password: the current password is incorrect' };
    await changePassword();
    const error = await screen.findByText('the current password is incorrect');
    expect(screen.getByLabelText('Current password').getAttribute('aria-invalid')).toBe('true');
    expect(error.getAttribute('role')).toBe('alert');
    expect(screen.getByRole('button', { name: 'Log out' })).toBeTruthy();
    expect(screen.queryByText(EXPIRED)).toBeNull();
  });
});

describe('a write refused 403 CSRF_TOKEN_INVALID', () => {
  it('on Profile\'s name form goes to the login page, not under the field', async () => {
    server.write = { status: 403, message: CSRF };
    await saveName();
    await expectLoginPageSayingExpired();
  });

  it('on the password form too', async () => {
    server.write = { status: 403, message: CSRF };
    await changePassword();
    await expectLoginPageSayingExpired();
  });

  it('on any other write (referral quota moved to the balance)', async () => {
    server.write = { status: 403, message: CSRF };
    render(<App />);
    fireEvent.click(await screen.findByRole('button', { name: 'Move to balance' }));
    await expectLoginPageSayingExpired();
    await waitFor(() => expect(screen.queryByRole('button', { name: 'Log out' })).toBeNull());
  });
});
