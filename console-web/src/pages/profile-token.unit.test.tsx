// @vitest-environment happy-dom
// Revoking the access token stops every script using it at once: asked first ("Confirm revoke" /
// "Keep"), as Delete is.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Account } from '../api/types';

const sent = vi.hoisted(() => {
  const s: string[] = [];
  vi.stubGlobal('fetch', async (r: Request) => {
    // The page reads the public status (whether mail is on, for binding an address) as it opens.
    if (new URL(r.url).pathname !== '/api/status') s.push(`${r.method} ${new URL(r.url).pathname}`);
    const data = r.method === 'GET' && new URL(r.url).pathname === '/api/user/token' ? 'sk-access-token-1' : { revoked: 1 };
    return new Response(JSON.stringify({ success: true, message: '', data }), { status: 200, headers: { 'content-type': 'application/json' } });
  });
  return s;
});

import { ProfilePage } from './profile';

afterEach(() => { cleanup(); sent.length = 0; });

const account = { id: 1, username: 'u', display_name: 'u', role: 1, status: 1, email: '', group: 'default', quota: 0, used_quota: 0, request_count: 0,
  aff_code: 'abc', aff_count: 0, aff_quota: 0, aff_history_quota: 0 } as unknown as Account;

describe('Profile: Revoke access token', () => {
  it('revokes only once confirmed; Keep goes back with nothing sent', async () => {
    render(<ProfilePage account={account} refreshAccount={() => {}} />);
    fireEvent.click(screen.getByRole('button', { name: 'Revoke access token' }));
    const confirm = await screen.findByRole('button', { name: 'Confirm revoke' });
    await waitFor(() => expect(document.activeElement).toBe(confirm));
    await new Promise((r) => setTimeout(r, 20));
    expect(sent).toEqual([]);
    fireEvent.click(screen.getByRole('button', { name: 'Keep' }));
    await waitFor(() => expect(document.activeElement).toBe(screen.getByRole('button', { name: 'Revoke access token' })));
    expect(sent).toEqual([]);
    fireEvent.click(screen.getByRole('button', { name: 'Revoke access token' }));
    fireEvent.click(await screen.findByRole('button', { name: 'Confirm revoke' }));
    await screen.findByText('Access token revoked.');
    expect(sent).toEqual(['DELETE /api/user/token']);
  });
});

// A password change signs the access token out on the server: the one shown no longer works.
describe('Profile: access token after a password change', () => {
  it('the shown token goes once the password is changed, and the card says it was revoked', async () => {
    render(<ProfilePage account={account} refreshAccount={() => {}} />);
    fireEvent.click(screen.getByRole('button', { name: 'Issue access token' }));
    expect(await screen.findByText('sk-access-token-1')).toBeTruthy();
    fireEvent.input(screen.getByLabelText('Current password'), { target: { value: 'old-password1' } });
    fireEvent.input(screen.getByLabelText('New password'), { target: { value: 'new-password1' } });
    fireEvent.input(screen.getByLabelText('New password again'), { target: { value: 'new-password1' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Change password' }));
    await screen.findByText('Password changed; your other sessions and access token were signed out.');
    expect(screen.queryByText('sk-access-token-1')).toBeNull();
    expect(screen.queryByRole('button', { name: 'Copy token' })).toBeNull();
    expect(screen.getByText('The access token was revoked by the password change; issue a new one for scripts.')).toBeTruthy();
    expect(sent).toEqual(['GET /api/user/token', 'PUT /api/user/self']);
    // Issuing again shows the new token, and the note goes.
    fireEvent.click(screen.getByRole('button', { name: 'Issue access token' }));
    expect(await screen.findByText('sk-access-token-1')).toBeTruthy();
    expect(screen.queryByText(/revoked by the password change/)).toBeNull();
  });
});
