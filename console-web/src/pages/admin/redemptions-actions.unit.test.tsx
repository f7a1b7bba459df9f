// @vitest-environment happy-dom
// A code's Delete asks first ("Confirm delete" / "Keep"), as a key's, an account's and a channel's do.
// A past expiry is refused next to its field before anything is sent, in the key form's words.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';

const sent = vi.hoisted(() => {
  const writes: string[] = [];
  vi.stubGlobal('fetch', async (r: Request) => {
    const url = new URL(r.url);
    const reply = (body: unknown) => new Response(JSON.stringify({ success: true, message: '', data: body }), { status: 200, headers: { 'content-type': 'application/json' } });
    if (r.method === 'GET' && url.pathname === '/api/redemption/') {
      return reply({ items: [{ id: 5, user_id: 1, name: 'gift', key: '0123********cdef', status: 1, quota: 500_000, created_time: 1_800_000_000, redeemed_time: 0, used_user_id: 0, expired_time: -1 }],
        total: 1, page: 1, page_size: 20 });
    }
    writes.push(`${r.method} ${url.pathname}`);
    return reply(r.method === 'POST' ? ['code'] : null);
  });
  return writes;
});

import { AdminRedemptionsPage } from './redemptions';

afterEach(() => { cleanup(); sent.length = 0; });

describe('AdminRedemptionsPage: Delete', () => {
  it('deletes only once confirmed; Keep goes back with nothing sent', async () => {
    render(<AdminRedemptionsPage />);
    fireEvent.click(await screen.findByRole('button', { name: 'Delete code 5' }));
    const confirm = await screen.findByRole('button', { name: 'Confirm deleting code 5' });
    expect(confirm.textContent).toBe('Confirm delete');
    await waitFor(() => expect(document.activeElement).toBe(confirm));
    await new Promise((r) => setTimeout(r, 20));
    expect(sent).toEqual([]);
    fireEvent.click(screen.getByRole('button', { name: 'Keep' }));
    await waitFor(() => expect(document.activeElement).toBe(screen.getByRole('button', { name: 'Delete code 5' })));
    expect(sent).toEqual([]);
    fireEvent.click(screen.getByRole('button', { name: 'Delete code 5' }));
    fireEvent.click(await screen.findByRole('button', { name: 'Confirm deleting code 5' }));
    await waitFor(() => expect(sent).toEqual(['DELETE /api/redemption/5']));
  });
});

describe('Create codes: Expires at', () => {
  it('refuses a past time next to the field, before sending, as the key form does', async () => {
    render(<AdminRedemptionsPage />);
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'gift' } });
    const expires = screen.getByLabelText('Expires at');
    fireEvent.input(expires, { target: { value: '2020-01-01T00:00' } });
    fireEvent.submit(screen.getByRole('form', { name: 'Create codes' }));
    const error = await screen.findByText('must be in the future');
    expect(expires.getAttribute('aria-invalid')).toBe('true');
    expect(expires.getAttribute('aria-describedby')).toBe(error.id);
    await new Promise((r) => setTimeout(r, 20));
    expect(sent).toEqual([]);
    // Editing the field takes the error away; a future time is sent.
    const future = new Date(Date.now() + 86_400_000);
    const pad = (n: number) => String(n).padStart(2, '0');
    fireEvent.input(expires, { target: { value: `${future.getFullYear()}-${pad(future.getMonth() + 1)}-${pad(future.getDate())}T12:00` } });
    await waitFor(() => expect(expires.getAttribute('aria-invalid')).toBeNull());
    fireEvent.submit(screen.getByRole('form', { name: 'Create codes' }));
    await waitFor(() => expect(sent).toEqual(['POST /api/redemption/']));
  });
});
