// @vitest-environment happy-dom
// The server records an order before it asks the provider for a checkout: a pay attempt that then fails
// still leaves an order, which "Your orders" shows without a reload of the page.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Account } from '../api/types';

// The API client takes fetch when it is created, on import: the stub has to be in place before.
const server = vi.hoisted(() => {
  const s = { orders: [] as Record<string, unknown>[], orderReads: 0, cardLink: undefined as string | undefined };
  const reply = (status: number, b: unknown) => new Response(JSON.stringify(b), { status, headers: { 'content-type': 'application/json' } });
  const record = (amount: number, method: string) => {
    const n = s.orders.length + 1;
    s.orders.unshift({ id: n, user_id: 1, amount, money: amount, trade_no: `ORDER-${n}`, payment_method: method, payment_provider: method === 'stripe' ? 'card' : 'epay',
      create_time: Math.floor(Date.now() / 1000), complete_time: 0, status: 'pending' });
  };
  vi.stubGlobal('fetch', async (r: Request) => {
    const path = new URL(r.url).pathname;
    if (r.method === 'GET' && path === '/api/user/topup/info') {
      return reply(200, { success: true, message: '', data: {
        enable_online_topup: true, enable_cardpay_topup: true, enable_redemption: false, pay_methods: [{ name: 'Alipay', type: 'alipay', color: 'blue', min_topup: '1' }],
        min_topup: 1, cardpay_min_topup: 1, amount_options: [10], discount: {}, topup_link: '',
      } });
    }
    if (r.method === 'GET' && path === '/api/user/topup/self') {
      s.orderReads++;
      const keyword = new URL(r.url).searchParams.get('keyword');
      const items = keyword ? s.orders.filter((o) => String(o.trade_no).includes(keyword)) : s.orders;
      return reply(200, { success: true, message: '', data: { items, total: items.length } });
    }
    if (r.method === 'GET') return reply(200, { success: true, message: '', data: {} });
    const body = await r.json() as { amount: number };
    if (path === '/api/user/cardpay/pay') {
      record(body.amount, 'stripe');
      if (s.cardLink !== undefined) return reply(200, { success: true, message: '', data: { pay_link: s.cardLink } });
      return reply(502, { success: false, message: 'the card provider did not create a checkout session' });
    }
    if (path === '/api/user/pay') {
      record(body.amount, 'alipay');
      return reply(200, { success: true, message: '', data: { url: 'https://pay.example/submit', params: { out_trade_no: 'ORDER-2' } } });
    }
    return reply(404, { success: false, message: 'not found' });
  });
  return s;
});

import { TopupPage } from './topup';

afterEach(() => { cleanup(); server.orders.length = 0; server.orderReads = 0; server.cardLink = undefined; vi.restoreAllMocks(); });

const account = { id: 1, username: 'u', display_name: 'u', role: 1, status: 1, group: 'default', quota: 0, used_quota: 0, request_count: 0 } as unknown as Account;

describe('TopupPage: Your orders after a pay attempt', () => {
  it('a failed card payment\'s order is listed without reloading the page', async () => {
    render(<TopupPage account={account} refreshAccount={() => {}} />);
    expect(await screen.findByText('No orders.')).toBeTruthy();
    fireEvent.click(screen.getByRole('button', { name: 'Pay by card' }));
    expect(await screen.findByText('the card provider did not create a checkout session')).toBeTruthy();
    expect(await screen.findByText('ORDER-1')).toBeTruthy();
    expect(screen.queryByText('No orders.')).toBeNull();
  });

  it('a search in the list is cleared by a pay attempt: the new order is shown, not hidden by the filter', async () => {
    render(<TopupPage account={account} refreshAccount={() => {}} />);
    expect(await screen.findByText('No orders.')).toBeTruthy();
    const field = screen.getByLabelText('Order number contains') as HTMLInputElement;
    fireEvent.input(field, { target: { value: 'OLD-' } });
    fireEvent.click(screen.getByRole('button', { name: 'Search' }));
    await waitFor(() => expect(server.orderReads).toBeGreaterThanOrEqual(2));
    fireEvent.click(screen.getByRole('button', { name: 'Pay by card' }));
    expect(await screen.findByText('ORDER-1')).toBeTruthy();
    expect(field.value).toBe('');
  });

  it('the list is read again after a payment sent on to the provider too', async () => {
    const assign = vi.spyOn(window.location, 'assign').mockImplementation(() => {});
    render(<TopupPage account={account} refreshAccount={() => {}} />);
    expect(await screen.findByText('No orders.')).toBeTruthy();
    const reads = server.orderReads;
    fireEvent.click(screen.getByRole('button', { name: 'Pay with Alipay' }));
    await waitFor(() => expect(assign).toHaveBeenCalledWith('https://pay.example/submit?out_trade_no=ORDER-2'));
    expect(await screen.findByText('ORDER-1')).toBeTruthy();
    expect(server.orderReads).toBe(reads + 1);
  });

  it('a card checkout link that is no web address is not followed (it would run in the console\'s origin)', async () => {
    const assign = vi.spyOn(window.location, 'assign').mockImplementation(() => {});
    server.cardLink = 'javascript:alert(document.cookie)';
    render(<TopupPage account={account} refreshAccount={() => {}} />);
    expect(await screen.findByText('No orders.')).toBeTruthy();
    fireEvent.click(screen.getByRole('button', { name: 'Pay by card' }));
    expect(await screen.findByText(/no web address/)).toBeTruthy();
    expect(assign).not.toHaveBeenCalled();
    server.cardLink = 'https://checkout.example/c/pay/cs_1';
    fireEvent.click(screen.getByRole('button', { name: 'Pay by card' }));
    await waitFor(() => expect(assign).toHaveBeenCalledWith('https://checkout.example/c/pay/cs_1'));
  });
});
