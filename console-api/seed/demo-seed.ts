// Local demo data for `make run`, created once and found again on later runs: the account `demo`
// (100 US dollars of quota), an administrator `admin` (role 10), a channel to the mock provider
// serving the usual Claude model names, an OpenAI-format channel (type 1) to the OpenAI-format mock
// serving GPT model names, and an unlimited API key of the demo account.
import { insertAccount } from '../accounts/account-store.js';
import { ROLE } from '../accounts/roles.js';
import { hashPassword, scryptParams, verifyPassword } from '../auth/password.js';
import { rebuildAbilities } from '../channels/abilities.js';
import { optionDef, storedOptionText } from '../options/option-catalogue.js';
import { createOptionSealer, type OptionSealer } from '../../core/options/option-secrets.js';
import type { Config } from '../../infra/config.js';
import type { Db } from '../db.js';
import type { Sql } from '../../infra/postgres/client.js';
import { type ApiKeyCrypto, createApiKeyCrypto, generateApiKey, maskApiKey } from '../../infra/secrets/api-key-crypto.js';

export const DEMO_USERNAME = 'demo';
export const ADMIN_USERNAME = 'admin';
export const DEMO_QUOTA = 100 * 500_000;
const DEMO_CHANNEL = 'mock-anthropic';
const DEMO_KEY_NAME = 'demo';
const DEMO_OPENAI_CHANNEL = 'mock-openai';
/** The names bench/mock-upstream-openai/ lists (OPENAI_MODELS). */
const DEMO_OPENAI_MODELS = ['gpt-4o-mini', 'gpt-4o', 'gpt-4.1'];
const DEMO_MODELS = [
  'claude-haiku-4-5', 'claude-sonnet-4-5', 'claude-opus-4-5', 'claude-opus-4-1', 'claude-sonnet-4-20250514',
  'claude-3-7-sonnet-20250219', 'claude-3-5-haiku-20241022',
];

export interface SeedResult {
  demoUserId: number;
  demoKey: string;
  /**
   * Why the demo key would be refused, as the key's owner left it ('' when it is usable): the seed does
   * not undo its owner's choice (disabled, expired), and the greeting's command said nothing and got 401.
   */
  demoKeyRefusal: string;
  created: string[];
}

/** An address on this machine as the seed writes them (http, a loopback host, a port): the seed's own. */
const LOCAL_ADDRESS = /^http:\/\/(?:127\.0\.0\.1|localhost)(?::\d+)?$/;

/**
 * A demo channel still pointing at a local mock port other than this start's (MOCK_UPSTREAM_PORT,
 * MOCK_OPENAI_PORT changed since the first seed) is pointed at this start's; an address set by hand
 * elsewhere is kept. True when it moved.
 */
async function movedToMock(tx: Db, channel: Record<string, unknown>, url: string): Promise<boolean> {
  const current = channel.base_url;
  if (typeof current !== 'string' || current === url || !LOCAL_ADDRESS.test(current)) return false;
  await tx`UPDATE channels SET base_url = ${url} WHERE id = ${channel.id as number}`;
  return true;
}

/** The options whose seeded value is an address of this machine, moved with the ports of each start. */
const LOCAL_ADDRESSES = new Set(['ServerAddress', 'PayAddress', 'CardpayApiAddress']);

export async function seedDemo(sql: Sql, config: Config): Promise<SeedResult> {
  const crypto = createApiKeyCrypto(config.KEY_SECRET);
  const optionSealer = createOptionSealer(config.KEY_SECRET);
  const created: string[] = [];
  return sql.begin(async (tx) => {
    // One seeder at a time: two `make run`s must not both create the demo key.
    await tx`SELECT pg_advisory_xact_lock(727200)`;
    const hashParams = scryptParams(config.PASSWORD_SCRYPT_LOG2N);
    let [demo] = await tx`SELECT id FROM users WHERE username = ${DEMO_USERNAME}`;
    if (!demo) {
      const row = await insertAccount(tx, { username: DEMO_USERNAME, displayName: 'Demo', passwordHash: await hashPassword(demoPassword(config.DEMO_PASSWORD), hashParams) });
      await tx`UPDATE users SET quota = ${DEMO_QUOTA} WHERE id = ${row.id}`;
      demo = { id: row.id };
      created.push(`account ${DEMO_USERNAME}`);
    }
    const [admin] = await tx`SELECT id FROM users WHERE username = ${ADMIN_USERNAME}`;
    if (!admin) {
      await insertAccount(tx, { username: ADMIN_USERNAME, displayName: 'Admin', role: 10, passwordHash: await hashPassword(demoPassword(config.ADMIN_PASSWORD), hashParams) });
      created.push(`administrator ${ADMIN_USERNAME}`);
    }
    const baseUrl = `http://127.0.0.1:${config.MOCK_UPSTREAM_PORT}`;
    const [channel] = await tx`SELECT id, key_ciphertext, base_url FROM channels WHERE name = ${DEMO_CHANNEL}`;
    if (channel && await movedToMock(tx, channel, baseUrl)) created.push(`channel ${DEMO_CHANNEL} -> ${baseUrl}`);
    if (channel && !opens(crypto, channel.key_ciphertext as Buffer)) {
      // Sealed under another KEY_SECRET (a database kept from an earlier .data/): re-seal the mock's key.
      await tx`UPDATE channels SET key_ciphertext = ${crypto.seal(config.MOCK_UPSTREAM_KEY)} WHERE id = ${channel.id}`;
      created.push(`channel ${DEMO_CHANNEL} credential re-sealed under the current KEY_SECRET`);
    }
    if (!channel) {
      const [row] = await tx`
        INSERT INTO channels (type, name, base_url, key_ciphertext, models, "group")
        VALUES (14, ${DEMO_CHANNEL}, ${baseUrl}, ${crypto.seal(config.MOCK_UPSTREAM_KEY)}, ${DEMO_MODELS.join(',')}, 'default')
        RETURNING *`;
      await rebuildAbilities(tx, row as never);
      created.push(`channel ${DEMO_CHANNEL} -> ${baseUrl}`);
    }
    // The OpenAI-format mock, so /v1/chat/completions (and /v1/messages) reach a channel of type 1 too.
    const openaiUrl = `http://127.0.0.1:${config.MOCK_OPENAI_PORT}`;
    const [openaiChannel] = await tx`SELECT id, key_ciphertext, base_url FROM channels WHERE name = ${DEMO_OPENAI_CHANNEL}`;
    if (openaiChannel && await movedToMock(tx, openaiChannel, openaiUrl)) created.push(`channel ${DEMO_OPENAI_CHANNEL} -> ${openaiUrl}`);
    if (openaiChannel && !opens(crypto, openaiChannel.key_ciphertext as Buffer)) {
      await tx`UPDATE channels SET key_ciphertext = ${crypto.seal(config.MOCK_OPENAI_KEY)} WHERE id = ${openaiChannel.id}`;
      created.push(`channel ${DEMO_OPENAI_CHANNEL} credential re-sealed under the current KEY_SECRET`);
    }
    if (!openaiChannel) {
      const [row] = await tx`
        INSERT INTO channels (type, name, base_url, key_ciphertext, models, "group")
        VALUES (1, ${DEMO_OPENAI_CHANNEL}, ${openaiUrl}, ${crypto.seal(config.MOCK_OPENAI_KEY)}, ${DEMO_OPENAI_MODELS.join(',')}, 'default')
        RETURNING *`;
      await rebuildAbilities(tx, row as never);
      created.push(`channel ${DEMO_OPENAI_CHANNEL} -> ${openaiUrl}`);
    }
    // Point the console's payment options at the local sandboxes (bench/payment-sandbox), once: an
    // administrator's later change is kept.
    const paymentOptions: Record<string, string> = {
      ServerAddress: `http://${config.CONSOLE_HOST}:${config.CONSOLE_PORT}`,
      PaymentComplianceConfirmed: 'true',
      PayAddress: `http://127.0.0.1:${config.EPAY_SANDBOX_PORT}`,
      EpayId: '1000',
      EpayKey: 'epay-sandbox-key',
      CardpayApiAddress: `http://127.0.0.1:${config.CARDPAY_SANDBOX_PORT}`,
      CardpayApiSecret: 'sk_test_cardpay_sandbox',
      CardpayWebhookSecret: 'whsec_cardpay_sandbox',
    };
    for (const [key, value] of Object.entries(paymentOptions)) {
      const d = optionDef(key)!;
      const [kept] = await tx<{ value: string }[]>`SELECT value FROM options WHERE key = ${key}`;
      if (!kept) {
        await tx`INSERT INTO options (key, value) VALUES (${key}, ${storedOptionText(d, value, optionSealer)})`;
      } else if (LOCAL_ADDRESSES.has(key) && kept.value !== value && LOCAL_ADDRESS.test(kept.value)) {
        // This start's CONSOLE_PORT or sandbox ports, where the seed's own local address was (not one
        // set by hand): the sandboxes listened on the new ports and checkout went to the old ones.
        await tx`UPDATE options SET value = ${value} WHERE key = ${key}`;
        created.push(`option ${key} -> ${value}`);
      } else if (d.secret && !optionOpens(optionSealer, key, kept.value)) {
        // Sealed under another KEY_SECRET, like the channel credentials above: the sandbox's again.
        await tx`UPDATE options SET value = ${storedOptionText(d, value, optionSealer)} WHERE key = ${key}`;
        created.push(`option ${key} re-sealed under the current KEY_SECRET`);
      }
    }
    // The mock provider listens on 127.0.0.1, which channels may not point at by default (the SSRF
    // guard of core/net/outbound-guard.ts). A demo stack on one machine needs it, so the
    // seed allows it explicitly, once: set ChannelAllowPrivateNetworks to false to see the guard.
    await tx`INSERT INTO options (key, value) VALUES ('ChannelAllowPrivateNetworks', 'true') ON CONFLICT (key) DO NOTHING`;
    const userId = demo.id as number;
    const [token] = await tx`SELECT key_ciphertext, status, expired_time FROM tokens WHERE user_id = ${userId} AND name = ${DEMO_KEY_NAME} AND deleted_at IS NULL`;
    const expired = token !== undefined && Number(token.expired_time) !== -1 && Number(token.expired_time) <= Math.floor(Date.now() / 1000);
    const demoKeyRefusal = token === undefined ? '' : Number(token.status) !== 1 ? 'disabled' : expired ? 'expired' : '';
    let demoKey: string;
    if (token && opens(crypto, token.key_ciphertext as Buffer)) {
      demoKey = crypto.open(token.key_ciphertext as Buffer);
    } else if (token) {
      // Sealed under another KEY_SECRET: the old value cannot be shown, so the demo key is replaced.
      demoKey = generateApiKey();
      await tx`
        UPDATE tokens SET key_hash = ${crypto.hash(demoKey)}, key_ciphertext = ${crypto.seal(demoKey)}, key_mask = ${maskApiKey(demoKey)}
        WHERE user_id = ${userId} AND name = ${DEMO_KEY_NAME} AND deleted_at IS NULL`;
      created.push(`API key ${DEMO_KEY_NAME} replaced (it was sealed under another KEY_SECRET)`);
    } else {
      demoKey = generateApiKey();
      await tx`
        INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, unlimited_quota)
        VALUES (${userId}, ${DEMO_KEY_NAME}, ${crypto.hash(demoKey)}, ${crypto.seal(demoKey)}, ${maskApiKey(demoKey)}, true)`;
      created.push(`API key ${DEMO_KEY_NAME}`);
    }
    return { demoUserId: userId, demoKey, demoKeyRefusal, created };
  });
}

/**
 * The demo logins as `make run` prints them: each with this checkout's password when it is the
 * account's, else saying it is not. A checkout's .data/ made after the database's accounts (a second
 * checkout, a new .data/) holds passwords the accounts never had: printed as they were, they failed.
 */
export async function demoLogins(sql: Db, config: Config): Promise<string> {
  const rows = await sql<{ username: string; password_hash: string }[]>`
    SELECT username, password_hash FROM users WHERE username IN (${DEMO_USERNAME}, ${ADMIN_USERNAME})`;
  const shown: string[] = [];
  for (const [name, password] of [[DEMO_USERNAME, config.DEMO_PASSWORD], [ADMIN_USERNAME, config.ADMIN_PASSWORD]] as const) {
    const row = rows.find((r) => r.username === name);
    if (!row) continue;
    const ok = typeof password === 'string' && password !== '' && await verifyPassword(password, row.password_hash).catch(() => false);
    shown.push(ok ? `${name} / ${password}` : `${name} / (set before this checkout's .data/; not shown)`);
  }
  return shown.join(', ');
}

/**
 * The super administrator's login line for `make run`'s greeting, from the password generated into
 * `file` (ROOT_PASSWORD_FILE): shown only while it is still the account's. Read from the file alone,
 * a second `make run` printed a password the root had changed since, which no longer logged in.
 */
export async function rootLogin(sql: Db, file: string, password: string): Promise<string> {
  const [root] = await sql<{ username: string; password_hash: string }[]>`
    SELECT username, password_hash FROM users WHERE role >= ${ROLE.root} AND deleted_at IS NULL ORDER BY id LIMIT 1`;
  if (!root) return '';
  const ok = password !== '' && await verifyPassword(password, root.password_hash).catch(() => false);
  return ok ? `${root.username} / ${password}   (generated into ${file})` : `${root.username} / (changed since it was generated into ${file}; not shown)`;
}

/** loadConfig refuses SEED_DEMO without both passwords; this keeps the types honest. */
function demoPassword(p: string | undefined): string {
  if (!p) throw new Error('the demo seed needs DEMO_PASSWORD and ADMIN_PASSWORD');
  return p;
}

function optionOpens(sealer: OptionSealer, key: string, stored: string): boolean {
  try {
    sealer.open(key, stored);
    return true;
  } catch {
    return false;
  }
}

function opens(crypto: ApiKeyCrypto, sealed: Buffer): boolean {
  try {
    crypto.open(sealed);
    return true;
  } catch {
    return false;
  }
}
