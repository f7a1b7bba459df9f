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
    return new Response(JSON.stringify({ success: true, message: '', data: { revoked: 1 } }), { status: 200, headers: { 'content-type': 'application/json' } });
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
