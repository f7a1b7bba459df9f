// @vitest-environment happy-dom
// The Account id filter is checked before it is sent (Number("12a") sent user_id=NaN); an error
// answer leaves no rows of the previous filters, which would read as the answer to the new ones.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Account } from '../../api/types';

const server = vi.hoisted(() => {
  const s = { asked: [] as URL[], failNext: false };
  vi.stubGlobal('fetch', async (r: Request) => {
    const url = new URL(r.url);
    const reply = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    if (url.pathname === '/api/option/') return reply(200, { success: true, message: '', data: [] });
    if (url.pathname === '/api/user/topup') {
      s.asked.push(url);
      if (s.failNext) return reply(503, { success: false, message: 'the console cannot reach its database right now; retry shortly' });
      return reply(200, { success: true, message: '', data: { items: [{ id: 1, user_id: 12, amount: 10, money: 70, trade_no: 'T-OLD-1', payment_method: 'alipay',
        payment_provider: 'epay', status: 'success', create_time: 1_800_000_000, complete_time: 1_800_000_100 }], total: 1, page: 1, page_size: 20 } });
    }
    return reply(404, { success: false, message: 'no such endpoint' });
  });
  return s;
});

import { AdminTopupsPage } from './topups';

afterEach(() => { cleanup(); server.asked.length = 0; server.failNext = false; });

const admin = { id: 1, username: 'admin', display_name: 'admin', role: 10, status: 1, group: 'default', quota: 0, used_quota: 0, request_count: 0 } as unknown as Account;

describe('AdminTopupsPage filters', () => {
  it('refuses an Account id that is not a whole number next to the field, sending nothing', async () => {
    render(<AdminTopupsPage account={admin} refreshAccount={() => {}} />);
    await screen.findByText('T-OLD-1');
    server.asked.length = 0;
    const id = screen.getByLabelText('Account id');
    for (const typed of ['12a', '1.5', '-3', 'abc']) {
      fireEvent.input(id, { target: { value: typed } });
      fireEvent.click(screen.getByRole('button', { name: 'Search' }));
      const error = await screen.findByText('must be a whole number');
      expect(id.getAttribute('aria-invalid'), typed).toBe('true');
      expect(id.getAttribute('aria-describedby')).toBe(error.id);
    }
    await new Promise((r) => setTimeout(r, 20));
    expect(server.asked).toEqual([]);
    // Editing takes the error away; an id is sent as one.
    fireEvent.input(id, { target: { value: '12' } });
    await waitFor(() => expect(id.getAttribute('aria-invalid')).toBeNull());
    fireEvent.click(screen.getByRole('button', { name: 'Search' }));
    await waitFor(() => expect(server.asked.map((u) => u.searchParams.get('user_id'))).toEqual(['12']));
  });

  it('an error answer leaves no rows of the previous search', async () => {
    render(<AdminTopupsPage account={admin} refreshAccount={() => {}} />);
    await screen.findByText('T-OLD-1');
    server.failNext = true;
    fireEvent.input(screen.getByLabelText('Account id'), { target: { value: '99' } });
    fireEvent.click(screen.getByRole('button', { name: 'Search' }));
    await screen.findByText('the console cannot reach its database right now; retry shortly');
    expect(screen.queryByText('T-OLD-1')).toBeNull();
    expect(screen.queryByRole('table')).toBeNull();
    expect(screen.queryByRole('navigation', { name: 'Order pages' })).toBeNull();
  });
});
