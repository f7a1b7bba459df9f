// @vitest-environment happy-dom
// Back from a payment provider (console-api/routes/topup.ts: epay returns to /console/topup with its
// signed notice appended, the card provider to /console/topup?paid=1), the Top up page says what the
// return says, never more: a return whose trade_status is not TRADE_SUCCESS is not called paid, and
// the amount in the address is not shown (the balance is the API's, read again). The parameters leave
// the address bar once read, so a reload does not say it again.
import { cleanup, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Account } from '../api/types';

vi.hoisted(() => {
  const reply = (b: unknown) => new Response(JSON.stringify(b), { status: 200, headers: { 'content-type': 'application/json' } });
  vi.stubGlobal('fetch', async (r: Request) => {
    const path = new URL(r.url).pathname;
    if (path === '/api/user/topup/info') {
      return reply({ success: true, message: '', data: {
        enable_online_topup: true, enable_cardpay_topup: false, enable_redemption: true, pay_methods: [{ name: 'Alipay', type: 'alipay', color: 'blue', min_topup: '1' }],
        min_topup: 1, cardpay_min_topup: 1, amount_options: [10], discount: {}, topup_link: '',
      } });
    }
    return reply({ success: true, message: '', data: { items: [], total: 0 } });
  });
});

import { paymentReturn, TopupPage, withoutReturnParams } from './topup';

afterEach(() => { cleanup(); history.replaceState(null, '', '/'); });

const account = { id: 1, username: 'u', display_name: 'u', role: 1, status: 1, group: 'default', quota: 2_500_000, used_quota: 0, request_count: 0 } as unknown as Account;

/** What the epay sandbox (bench/payment-sandbox/epay-sandbox.ts) appends to the return address. */
const epayReturn = (status: string, money = '20.00') => `?${new URLSearchParams({
  pid: '1001', trade_no: 'SBX1', out_trade_no: 'USR1NOabc', type: 'alipay', name: 'TUC20', money, trade_status: status,
  sign: '0123456789abcdef0123456789abcdef', sign_type: 'MD5',
}).toString()}`;

const PAID = /payment received/i;
const NOT_PAID = /not completed/i;

function openAt(address: string) {
  history.replaceState(null, '', address);
  const refreshAccount = vi.fn();
  render(<TopupPage account={account} refreshAccount={refreshAccount} />);
  return refreshAccount;
}

describe('paymentReturn', () => {
  it('reads only the outcome', () => {
    expect(paymentReturn(epayReturn('TRADE_SUCCESS'))).toBe('paid');
    expect(paymentReturn('?paid=1')).toBe('paid');
    for (const s of ['TRADE_CLOSED', 'WAIT_BUYER_PAY', '', 'trade_success']) expect(paymentReturn(epayReturn(s)), s).toBe('not-paid');
    expect(paymentReturn('?paid=0')).toBe('not-paid');
    expect(paymentReturn('?out_trade_no=USR1NOabc')).toBe('unknown');
    expect(paymentReturn('')).toBeNull();
    expect(paymentReturn('?page=2')).toBeNull();
    expect(paymentReturn('?type=alipay&name=x')).toBeNull();
  });

  it('removes the return parameters and keeps any other', () => {
    expect(withoutReturnParams(epayReturn('TRADE_SUCCESS'))).toBe('');
    expect(withoutReturnParams('?paid=1')).toBe('');
    expect(withoutReturnParams('?paid=1&keep=yes')).toBe('?keep=yes');
    expect(withoutReturnParams('')).toBe('');
  });
});

describe('TopupPage back from a provider', () => {
  it('epay, paid: says so, shows the API\'s balance and not the address\' amount, reads the balance again, clears the address', async () => {
    const refreshAccount = openAt(`/console/topup${epayReturn('TRADE_SUCCESS', '1000.00')}`);
    expect(screen.getByText(PAID)).toBeTruthy();
    await screen.findByRole('form', { name: 'Redeem a code' });
    expect(screen.getByTestId('balance').textContent).toBe('$5.00');
    expect(document.body.textContent).not.toMatch(/\$1,000|1000\.00/);
    expect(location.pathname + location.search).toBe('/console/topup');
    // Once on opening, and once more after the order list was read.
    await waitFor(() => expect(refreshAccount).toHaveBeenCalledTimes(2));
  });

  it('epay, not paid: says it was not completed, never that it was received', () => {
    openAt(`/console/topup${epayReturn('TRADE_CLOSED')}`);
    expect(screen.getByText(NOT_PAID)).toBeTruthy();
    expect(screen.queryByText(PAID)).toBeNull();
    expect(location.search).toBe('');
  });

  it('card, paid: says so; a reload of the cleared address says nothing', () => {
    openAt('/console/topup?paid=1');
    expect(screen.getByText(PAID)).toBeTruthy();
    expect(location.search).toBe('');
    cleanup();
    render(<TopupPage account={account} refreshAccount={() => {}} />);
    expect(screen.queryByText(/Back from the payment provider/)).toBeNull();
  });

  it('an ordinary visit says nothing and leaves the address alone', async () => {
    const refreshAccount = openAt('/topup');
    const replace = vi.spyOn(history, 'replaceState');
    await screen.findByRole('form', { name: 'Redeem a code' });
    expect(screen.queryByText(/Back from the payment provider/)).toBeNull();
    expect(replace).not.toHaveBeenCalled();
    replace.mockRestore();
    await new Promise((r) => setTimeout(r, 20));
    expect(refreshAccount).toHaveBeenCalledTimes(1);
  });
});
