// A bound address receives password reset codes. With a stolen session or a leaked access token
// alone, a taker bound its own address (no password asked), which outlived the owner's password
// change, then reset the password and locked the owner out, root's included (review auth). Binding
// an address now asks for the current password, a guess counted as a login attempt; an account made by
// sign-on, which knows no password, binds only within minutes of signing on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';
import { mailText, mailThroughSink, type SmtpSink, startSmtpSink } from '../../tests/harness/smtp-sink.js';
import { BIND_FRESH_SESSION_SEC } from './email-routes.js';

let h: ConsoleHarness;
let sink: SmtpSink;
const clock = Math.floor(Date.now() / 1000);

beforeAll(async () => {
  sink = await startSmtpSink();
  h = await startConsoleHarness({}, { now: () => clock });
  await mailThroughSink(h.sql, sink);
});
afterAll(async () => {
  await h?.close();
  await sink?.close();
});

const post = (url: string, payload: unknown, headers: Record<string, string> = {}) => h.app.inject({ method: 'POST', url, payload: payload as object, headers });

async function bindCode(address: string, auth: Record<string, string>): Promise<string> {
  const sent = await h.app.inject({ method: 'GET', url: `/api/verification?email=${encodeURIComponent(address)}&purpose=bind`, headers: auth });
  expect(sent.json()).toEqual({ success: true, message: '' });
  return /\b(\d{6})\b/.exec(mailText(await sink.next(address)))![1]!;
}

describe('binding an address with a session alone', () => {
  it('is refused without the current password and with a wrong one; the code stays usable; with it, bound', async () => {
    const a = await h.account();
    const address = `${uniqueName('taker')}@example.test`;
    const code = await bindCode(address, a.auth);
    const without = await post('/api/oauth/email/bind', { email: address, code }, a.auth);
    expect(without.statusCode).toBe(400);
    expect(without.json().message).toMatch(/^original_password: is required/);
    const wrong = await post('/api/oauth/email/bind', { email: address, code, original_password: 'not-the-password-1' }, a.auth);
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toEqual({ success: false, message: 'original_password: the current password is incorrect' });
    const [row] = await h.sql<{ email: string }[]>`SELECT email FROM users WHERE id = ${a.user.id}`;
    expect(row!.email).not.toBe(address);
    const right = await post('/api/oauth/email/bind', { email: address, code, original_password: a.password }, a.auth);
    expect(right.json()).toEqual({ success: true, message: '' });
  });

  it('a sign-on account (no password it knows) binds within minutes of signing on, not with an older session', async () => {
    const a = await h.account();
    await h.sql`UPDATE users SET oidc_id = ${uniqueName('oidc')} WHERE id = ${a.user.id}`;
    const address = `${uniqueName('so')}@example.test`;
    const code = await bindCode(address, a.auth);
    // The session is older than that: a stolen one, as far as the console can tell.
    await h.sql`UPDATE access_tokens SET created_at = created_at - ${BIND_FRESH_SESSION_SEC + 60} WHERE user_id = ${a.user.id}`;
    const stale = await post('/api/oauth/email/bind', { email: address, code }, a.auth);
    expect(stale.statusCode).toBe(400);
    expect(stale.json().message).toMatch(/sign on again/);
    await h.sql`UPDATE access_tokens SET created_at = created_at + ${BIND_FRESH_SESSION_SEC + 60} WHERE user_id = ${a.user.id}`;
    const fresh = await post('/api/oauth/email/bind', { email: address, code }, a.auth);
    expect(fresh.json()).toEqual({ success: true, message: '' });
  });
});
