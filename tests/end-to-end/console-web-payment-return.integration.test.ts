// Back from the QR-code provider (the local epay sandbox pays, notifies the console and sends the
// browser to console-api's return_url, /console/topup, with its signed notice appended), the Top up
// page says the payment was received and shows the balance the API reads, then drops the provider's
// parameters from the address so a reload says nothing. A return whose trade_status is not
// TRADE_SUCCESS is not called received, and no amount in the address is shown or credited.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EpaySandbox, startEpaySandbox } from '../../bench/payment-sandbox/epay-sandbox.js';
import { consoleCall } from '../harness/gateway-stack.js';
import { type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;
let epay: EpaySandbox;

beforeAll(async () => {
  b = await startConsoleBrowser();
  const EPAY = { pid: '1001', key: `epay-${randomBytes(8).toString('hex')}` };
  epay = await startEpaySandbox(EPAY);
  const options: Record<string, unknown> = {
    ServerAddress: b.stack.consoleUrl, PaymentComplianceConfirmed: true, PayAddress: epay.url, EpayId: EPAY.pid, EpayKey: EPAY.key, MinTopUp: 1,
  };
  for (const [key, value] of Object.entries(options)) {
    const res = await consoleCall(b.stack, 'PUT', '/api/option/', b.stack.adminToken, { key, value });
    if (!res.json.success) throw new Error(`option ${key}: ${res.json.message}`);
  }
}, 120_000);

afterAll(async () => {
  await b?.close();
  await epay?.close();
});

const RECEIVED = /payment received/i;
const NOT_COMPLETED = /not completed/i;

describe('back from the payment provider', () => {
  it('paid: says so, shows the balance the API reads, clears the address; a reload says nothing', async () => {
    const user = await insertAccount(b.stack, { quota: 500_000 });
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/topup');
    await page.getByLabel('Amount (US dollars of credit)').fill('20');
    await page.getByRole('button', { name: /^Pay with / }).first().click();
    await page.getByText(RECEIVED).waitFor();
    expect(await page.getByRole('status').filter({ hasText: RECEIVED }).count()).toBe(1);
    const [row] = await b.stack.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.id}`;
    expect(Number(row!.quota)).toBe(500_000 + 20 * 500_000);
    await page.getByTestId('balance').filter({ hasText: '$21.00' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/console/topup');
    // The notice renders first; the address is cleaned by the effect after it.
    await expect.poll(() => new URL(page.url()).search).toBe('');

    await page.reload();
    await page.getByRole('heading', { name: 'Top up' }).waitFor();
    await page.getByTestId('balance').filter({ hasText: '$21.00' }).waitFor();
    expect(await page.getByText(/Back from the payment provider/).count()).toBe(0);
  }, 120_000);

  it('a return that says the trade is not successful is not called received; the address\' money is not taken', async () => {
    const user = await insertAccount(b.stack, { quota: 500_000 });
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/topup');
    const back = (status: string) => `${b.stack.consoleUrl}/console/topup?${new URLSearchParams({
      pid: '1001', trade_no: 'SBX0', out_trade_no: `USR${user.id}NO${randomBytes(8).toString('hex')}`, type: 'alipay', name: 'TUC1000',
      money: '1000.00', trade_status: status, sign: randomBytes(16).toString('hex'), sign_type: 'MD5',
    }).toString()}`;

    await page.goto(back('TRADE_CLOSED'));
    await page.getByText(NOT_COMPLETED).waitFor();
    expect(await page.getByText(RECEIVED).count()).toBe(0);
    // The notice renders first; the address is cleaned by the effect after it.
    await expect.poll(() => new URL(page.url()).search).toBe('');

    // An address that claims success (anyone can type one): the balance is still the API's.
    await page.goto(back('TRADE_SUCCESS'));
    await page.getByText(RECEIVED).waitFor();
    await page.getByRole('heading', { name: 'Your orders' }).waitFor();
    expect(await page.getByTestId('balance').textContent()).toBe('$1.00');
    expect(await page.locator('body').textContent()).not.toMatch(/\$1,000|1000\.00/);
    const [row] = await b.stack.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.id}`;
    expect(Number(row!.quota)).toBe(500_000);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
