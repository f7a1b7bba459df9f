// @vitest-environment happy-dom
// The top-up page's Amount is read by the strict dollar reader: "1e3" is not $1,000 and is refused next
// to the field before anything is sent. A form's error is about what it sent: a failed redemption's goes
// once Pay online is used, or once the code is edited.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Account } from '../api/types';

// The API client takes fetch when it is created, on import: the stub has to be in place before.
const server = vi.hoisted(() => {
  const s: { posts: { path: string; body: unknown }[] } = { posts: [] };
  const reply = (status: number, b: unknown) => new Response(JSON.stringify(b), { status, headers: { 'content-type': 'application/json' } });
  vi.stubGlobal('fetch', async (r: Request) => {
    const path = new URL(r.url).pathname;
    if (r.method === 'GET' && path === '/api/user/topup/info') {
      return reply(200, { success: true, message: '', data: {
        enable_online_topup: true, enable_cardpay_topup: true, enable_redemption: true, pay_methods: [{ name: 'Alipay', type: 'alipay', color: 'blue', min_topup: '1' }],
        min_topup: 1, cardpay_min_topup: 1, amount_options: [10], discount: {}, topup_link: '',
      } });
    }
    if (r.method === 'GET') return reply(200, { success: true, message: '', data: { items: [], total: 0 } });
    s.posts.push({ path, body: await r.json() });
    if (path === '/api/user/topup') return reply(409, { success: false, message: 'redemption code is used' });
    return reply(200, { success: true, message: '', data: '7.00' });
  });
  return s;
});

import { topupAmount, topupAmountError, TopupPage } from './topup';

afterEach(() => { cleanup(); server.posts.length = 0; });

const account = { id: 1, username: 'u', display_name: 'u', role: 1, status: 1, group: 'default', quota: 0, used_quota: 0, request_count: 0 } as unknown as Account;

describe('topupAmount', () => {
  it('reads whole dollars strictly', () => {
    expect(topupAmount('20')).toBe(20);
    expect(topupAmount(' 20.00 ')).toBe(20);
    expect(topupAmount('$7')).toBe(7);
    for (const t of ['1e3', '0x10', '20.5', '20.0000001', '0', '-5', '', 'abc', '1,000']) expect(topupAmount(t), t).toBeUndefined();
  });

  it('names the largest order the API takes', () => {
    expect(topupAmount('1000000')).toBe(1_000_000);
    for (const t of ['1000001', '100000000', '1000000000000000000000']) {
      expect(topupAmount(t), t).toBeUndefined();
      expect(topupAmountError(t), t).toBe('must be at most $1,000,000');
    }
    expect(topupAmountError('1e15')).toBe('a whole number of dollars, such as 20');
  });
});

describe('TopupPage', () => {
  it('refuses "1e3" next to the Amount field and sends nothing', async () => {
    render(<TopupPage account={account} refreshAccount={() => {}} />);
    const amount = await screen.findByLabelText('Amount (US dollars of credit)');
    fireEvent.input(amount, { target: { value: '1e3' } });
    for (const name of ['Pay with Alipay', 'Pay by card', 'Show price']) {
      fireEvent.click(screen.getByRole('button', { name }));
      await waitFor(() => expect(amount.getAttribute('aria-invalid'), name).toBe('true'));
      expect(screen.getByText('a whole number of dollars, such as 20')).toBeTruthy();
    }
    await new Promise((r) => setTimeout(r, 20));
    expect(server.posts).toEqual([]);
    fireEvent.input(amount, { target: { value: '12' } });
    expect(amount.getAttribute('aria-invalid')).toBeNull();
    fireEvent.click(screen.getByRole('button', { name: 'Show price' }));
    await screen.findByText(/for \$12\.00 of credit/);
    expect(server.posts).toEqual([{ path: '/api/user/amount', body: { amount: 12 } }]);
  });

  it('a failed redemption\'s error goes once Pay online is used, or the code edited', async () => {
    render(<TopupPage account={account} refreshAccount={() => {}} />);
    const code = await screen.findByLabelText('Redemption code');
    const redeem = async () => {
      fireEvent.input(code, { target: { value: 'used-code' } });
      fireEvent.submit(screen.getByRole('form', { name: 'Redeem a code' }));
      await screen.findByText('redemption code is used');
    };
    await redeem();
    fireEvent.click(screen.getByRole('button', { name: 'Show price' }));
    await screen.findByText(/for \$10\.00 of credit/);
    expect(screen.queryByText('redemption code is used')).toBeNull();
    await redeem();
    fireEvent.input(code, { target: { value: 'another' } });
    await waitFor(() => expect(screen.queryByText('redemption code is used')).toBeNull());
  });
});
