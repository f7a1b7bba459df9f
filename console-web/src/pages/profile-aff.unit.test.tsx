// @vitest-environment happy-dom
// The referral transfer form says the least amount the server moves (AffTransferMinQuota, from GET
// /api/status) and refuses less before sending: the server's refusal alone left the account holder
// guessing (review webconsole).
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Account } from '../api/types';

const posted = vi.hoisted(() => {
  const sent: unknown[] = [];
  vi.stubGlobal('fetch', async (r: Request) => {
    const reply = (b: unknown) => new Response(JSON.stringify(b), { status: 200, headers: { 'content-type': 'application/json' } });
    if (new URL(r.url).pathname === '/api/status') return reply({ success: true, message: '', data: { aff_transfer_min_quota: 500_000 } });
    if (r.method === 'POST') sent.push(await r.json());
    return reply({ success: true, message: '', data: {} });
  });
  return sent;
});

import { ProfilePage } from './profile';

afterEach(cleanup);

const account = { id: 1, username: 'u', display_name: 'n', role: 1, status: 1, email: '', group: 'default', quota: 0, used_quota: 0, request_count: 0,
  aff_code: 'abc', aff_count: 1, aff_quota: 2_000_000, aff_history_quota: 2_000_000 } as unknown as Account;

describe('the referral transfer form', () => {
  it('says the least amount moved, and refuses less without sending it', async () => {
    render(<ProfilePage account={account} refreshAccount={() => {}} />);
    await screen.findByText('at least $1.00');
    const field = screen.getByLabelText('Referral quota to move (US dollars)');
    fireEvent.input(field, { target: { value: '0.50' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Move referral quota to the balance' }));
    await screen.findByText('At least $1.00 is moved at a time.');
    expect(posted).toEqual([]);
    fireEvent.input(field, { target: { value: '1.50' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Move referral quota to the balance' }));
    await waitFor(() => expect(posted).toEqual([{ quota: 750_000 }]));
  });
});
