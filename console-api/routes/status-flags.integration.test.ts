// GET /api/status tells the web console what its signed-out pages may offer, beyond the contract's
// fields: whether registration is open (register_enabled, password_register_enabled), needs an
// e-mail code (email_verification), whether mail is configured (email_enabled: password reset,
// binding an address) and OpenID Connect sign-on (oidc_enabled). Each follows its option at once.
// A refused ratio names its entry in words, not in the schema library's wording.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});

const status = async () => {
  const res = await h.app.inject({ method: 'GET', url: '/api/status' });
  expect(res.statusCode).toBe(200);
  return res.json().data as Record<string, unknown>;
};
const put = async (key: string, value: unknown) => {
  const res = await h.putOption(root, key, value);
  expect(res.json(), key).toMatchObject({ success: true });
};

describe('GET /api/status flags', () => {
  it('defaults: registration open, no e-mail code, no mail, no sign-on; the contract\'s fields kept', async () => {
    expect(await status()).toMatchObject({
      quota_per_unit: 500000, enable_redemption: true,
      register_enabled: true, password_register_enabled: true, email_verification: false, email_enabled: false, oidc_enabled: false,
    });
  });

  it('follows RegisterEnabled and PasswordRegisterEnabled', async () => {
    await put('RegisterEnabled', false);
    expect(await status()).toMatchObject({ register_enabled: false, password_register_enabled: true });
    await put('RegisterEnabled', true);
    await put('PasswordRegisterEnabled', false);
    expect(await status()).toMatchObject({ register_enabled: true, password_register_enabled: false });
    await put('PasswordRegisterEnabled', true);
    expect(await status()).toMatchObject({ register_enabled: true, password_register_enabled: true });
  });

  it('follows EmailVerificationEnabled and SMTPServer', async () => {
    await put('SMTPServer', '127.0.0.1');
    await put('EmailVerificationEnabled', true);
    expect(await status()).toMatchObject({ email_verification: true, email_enabled: true });
    await put('EmailVerificationEnabled', false);
    await put('SMTPServer', '');
    expect(await status()).toMatchObject({ email_verification: false, email_enabled: false });
  });

  it('oidc_enabled only when sign-on can start: enabled with an issuer and a client id', async () => {
    await put('oidc.enabled', true);
    expect((await status()).oidc_enabled).toBe(false);
    await put('oidc.well_known', 'https://id.example.test');
    await put('oidc.client_id', 'gateway');
    expect((await status()).oidc_enabled).toBe(true);
    await put('oidc.enabled', false);
    expect((await status()).oidc_enabled).toBe(false);
  });

  it('is in the OpenAPI document with the flags', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
    const data = doc.paths['/api/status'].get.responses['200'].content['application/json'].schema.properties.data;
    expect(Object.keys(data.properties)).toEqual(expect.arrayContaining(['register_enabled', 'password_register_enabled', 'email_verification', 'email_enabled', 'oidc_enabled']));
  });
});

describe('a refused ratio', () => {
  it.each([
    ['ModelRatio', { 'claude-haiku-4-5': -1 }, 'the entry "claude-haiku-4-5" is -1, below 0'],
    ['CompletionRatio', { 'gpt-4o': 2, 'my-model': 'two' }, 'the entry "my-model" is not a number'],
    // JSON reads 1e400 as Infinity; stored, every cost of the model was infinite (review admin).
    ['ModelRatio', '{"claude-haiku-4-5":1e400}', 'the entry "claude-haiku-4-5" is too large a number'],
  ])('%s names the entry in words', async (key, value, why) => {
    const res = await h.putOption(root, key, value);
    expect(res.statusCode).toBe(400);
    const message: string = res.json().message;
    expect(message).toContain(why);
    expect(message).not.toMatch(/Too small|Invalid input|expected \w+/);
  });
});
