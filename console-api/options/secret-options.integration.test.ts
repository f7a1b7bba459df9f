// Secret options at rest: a dump of `options` must not give the payment keys, SMTPToken or the OIDC
// client secret (an EpayKey forges paid notices). Set through PUT /api/option/, they are stored sealed
// under KEY_SECRET and still work where they are read; a value stored in clear by an earlier version
// still works, and the console's start-up step seals it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { epaySandboxSign } from '../../bench/payment-sandbox/epay-sandbox.js';
import { loadSmtpSettings } from '../../core/email/mailer.js';
import { createWebhookSecretSealer } from '../../core/notices/notice-setting.js';
import { createOptionSealer } from '../../core/options/option-secrets.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { loadTopupSettings } from '../payments/topup-settings.js';
import { sealLegacySecrets } from '../secrets/seal-legacy-secrets.js';
import { OPTION_CATALOGUE } from './option-catalogue.js';

const SECRET_KEYS = OPTION_CATALOGUE.filter((d) => d.secret).map((d) => d.key);
const EPAY_PID = '1001';

let h: ConsoleHarness;
let root: TestAccount;

beforeAll(async () => {
  h = await startConsoleHarness();
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});

const putOption = (key: string, value: string) =>
  h.putOption(root, key, value);
const stored = (key: string) => h.storedOption(key);
const storeRaw = (key: string, value: string) =>
  h.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
const sealers = () => ({ options: createOptionSealer(h.config.KEY_SECRET), webhooks: createWebhookSecretSealer(h.config.KEY_SECRET) });

/** A paid notice for an order that does not exist: 404 once its signature is accepted, 400 if not. */
async function epayNotifyStatus(signingKey: string): Promise<number> {
  const params: Record<string, string> = { pid: EPAY_PID, trade_no: 'T1', out_trade_no: 'USR1NOnone', type: 'alipay', name: 'x', money: '1.00', trade_status: 'TRADE_SUCCESS' };
  const qs = new URLSearchParams({ ...params, sign: epaySandboxSign(params, signingKey), sign_type: 'MD5' });
  return (await h.app.inject({ method: 'GET', url: `/api/user/epay/notify?${qs}` })).statusCode;
}

describe('secret options', () => {
  it('are stored sealed, shown blank, and read back in clear by their readers', async () => {
    expect(SECRET_KEYS).toEqual(expect.arrayContaining(['EpayKey', 'CardpayApiSecret', 'CardpayWebhookSecret', 'SMTPToken', 'oidc.client_secret']));
    const plain = (key: string) => `${key}-plaintext-value-0123`;
    for (const key of SECRET_KEYS) {
      const res = await putOption(key, plain(key));
      expect(res.statusCode, res.body).toBe(200);
      const value = (await stored(key))!;
      expect(value).not.toContain(plain(key));
      expect(value.startsWith('sealed:v1:')).toBe(true);
    }
    const listed = (await h.app.inject({ method: 'GET', url: '/api/option/', headers: root.auth })).json().data as { key: string; value: string; configured: boolean }[];
    for (const key of SECRET_KEYS) expect(listed.find((o) => o.key === key)).toMatchObject({ value: '', configured: true });

    const s = await loadTopupSettings(h.sql);
    expect(s.epay.key).toBe(plain('EpayKey'));
    expect(s.cardpay).toMatchObject({ apiSecret: plain('CardpayApiSecret'), webhookSecret: plain('CardpayWebhookSecret') });
    await storeRaw('SMTPServer', '127.0.0.1');
    expect((await loadSmtpSettings(h.sql, createOptionSealer(h.config.KEY_SECRET)))?.password).toBe(plain('SMTPToken'));

    // Emptied: stored empty, not configured.
    expect((await putOption('SMTPToken', '')).statusCode).toBe(200);
    expect(await stored('SMTPToken')).toBe('');
  });

  it('an epay notice signed with the key set is accepted, one signed with what the table holds is not', async () => {
    const key = 'epay-merchant-key-sealed';
    expect((await putOption('EpayId', EPAY_PID)).statusCode).toBe(200);
    expect((await putOption('EpayKey', key)).statusCode).toBe(200);
    expect(await epayNotifyStatus(key)).toBe(404);
    expect(await epayNotifyStatus((await stored('EpayKey'))!)).toBe(400);
  });

  it('a value stored in clear by an earlier version still works, and start-up seals it once', async () => {
    const legacy = 'epay-key-stored-in-clear';
    await storeRaw('EpayId', EPAY_PID);
    await storeRaw('EpayKey', legacy);
    await storeRaw('CardpayWebhookSecret', 'whsec-stored-in-clear');
    expect((await loadTopupSettings(h.sql)).epay.key).toBe(legacy);
    expect(await epayNotifyStatus(legacy)).toBe(404);

    const first = await sealLegacySecrets(h.sql, sealers());
    expect(first.options.sort()).toEqual(['CardpayWebhookSecret', 'EpayKey']);
    expect(await stored('EpayKey')).not.toContain(legacy);
    expect((await stored('EpayKey'))!.startsWith('sealed:v1:')).toBe(true);
    expect((await loadTopupSettings(h.sql)).cardpay.webhookSecret).toBe('whsec-stored-in-clear');
    expect(await epayNotifyStatus(legacy)).toBe(404);
    expect((await sealLegacySecrets(h.sql, sealers())).options).toEqual([]);
  });

  it('a sealed value opens only under its own key and KEY_SECRET', async () => {
    expect((await putOption('EpayKey', 'epay-key-bound-to-its-row')).statusCode).toBe(200);
    const sealed = (await stored('EpayKey'))!;
    // Copied into SMTPToken it would be sent to whatever SMTPServer says: it must not open there.
    await storeRaw('SMTPToken', sealed);
    const smtp = await loadSmtpSettings(h.sql, createOptionSealer(h.config.KEY_SECRET));
    expect(() => smtp!.password).toThrow(/SMTPToken cannot be opened/);
    expect(() => createOptionSealer('another-key-secret-0123456789').open('EpayKey', sealed)).toThrow(/EpayKey cannot be opened/);
    await storeRaw('SMTPToken', '');
  });

  it('one that cannot be opened (sealed under another KEY_SECRET, a restore) fails what needs it, not /api/status, the top-up page or redemption', async () => {
    const foreign = createOptionSealer('another-key-secret-0123456789');
    const user = await h.account();
    const before = { EpayKey: await stored('EpayKey'), CardpayWebhookSecret: await stored('CardpayWebhookSecret') };
    for (const [key, value] of [['PaymentComplianceConfirmed', 'true'], ['PayAddress', 'http://127.0.0.1:9'], ['EpayId', EPAY_PID]] as const) {
      expect((await putOption(key, value)).statusCode).toBe(200);
    }
    await storeRaw('EpayKey', foreign.seal('EpayKey', 'epay-key-of-another-deployment'));
    await storeRaw('CardpayWebhookSecret', foreign.seal('CardpayWebhookSecret', 'whsec-of-another-deployment'));
    try {
      expect((await h.app.inject({ method: 'GET', url: '/api/status' })).statusCode).toBe(200);
      const info = await h.app.inject({ method: 'GET', url: '/api/user/topup/info', headers: user.auth });
      expect(info.statusCode).toBe(200);
      expect(info.json().data.enable_online_topup).toBe(true);
      // A redemption reads the same settings and needs no secret.
      const redeem = await h.app.inject({ method: 'POST', url: '/api/user/topup', headers: user.auth, payload: { key: 'no-such-code-000000000000' } });
      expect(redeem.statusCode).toBe(404);
      // The notice, which needs the key, fails and credits nothing.
      expect(await epayNotifyStatus('epay-key-of-another-deployment')).toBeGreaterThanOrEqual(400);
      // Mail configured with a token that cannot be opened: the reset answers as for any address.
      await storeRaw('SMTPServer', '127.0.0.1');
      await storeRaw('SMTPToken', foreign.seal('SMTPToken', 'smtp-token'));
      const reset = await h.app.inject({ method: 'GET', url: `/api/reset_password?email=${encodeURIComponent('nobody@example.test')}` });
      expect(reset.statusCode).toBe(200);
    } finally {
      await storeRaw('SMTPServer', '');
      await storeRaw('SMTPToken', '');
      await storeRaw('PaymentComplianceConfirmed', 'false');
      for (const [key, value] of Object.entries(before)) await storeRaw(key, value ?? '');
    }
  });
});
