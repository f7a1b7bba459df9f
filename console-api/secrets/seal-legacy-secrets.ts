// Secrets stored before they were sealed (the values of secret options, the accounts' webhook secrets
// in users.setting) still read as plaintext, and a dump would still show them: this seals them once,
// when the console starts. Not a migration: migrations run without KEY_SECRET (infra/config.ts),
// while the console always has it and has just run them (main.ts). Each row is rewritten only if it
// still holds what was read, so a change made meanwhile (another console starting, a PUT) is kept;
// sealed values are skipped, so running it again does nothing.
import type { WebhookSecretSealer } from '../../core/notices/notice-setting.js';
import type { OptionSealer } from '../../core/options/option-secrets.js';
import type { Sql } from '../../infra/postgres/client.js';
import { isSealedText, SEALED_TEXT_PREFIX } from '../../infra/secrets/api-key-crypto.js';
import { OPTION_CATALOGUE } from '../options/option-catalogue.js';

const ACCOUNT_PAGE = 500;

export interface SealedLegacySecrets {
  /** Keys of the options sealed. */
  options: string[];
  /** Accounts whose webhook secret was sealed. */
  accounts: number;
}

export async function sealLegacySecrets(sql: Sql, sealers: { options: OptionSealer; webhooks: WebhookSecretSealer }): Promise<SealedLegacySecrets> {
  const secretKeys = OPTION_CATALOGUE.filter((d) => d.secret).map((d) => d.key);
  const options: string[] = [];
  const plainOptions = await sql<{ key: string; value: string }[]>`
    SELECT key, value FROM options
    WHERE key IN ${sql(secretKeys)} AND value <> '' AND NOT starts_with(value, ${SEALED_TEXT_PREFIX})`;
  for (const { key, value } of plainOptions) {
    const done = await sql`UPDATE options SET value = ${sealers.options.seal(key, value)} WHERE key = ${key} AND value = ${value}`;
    if (done.count > 0) options.push(key);
  }

  let accounts = 0;
  for (let after = 0; ;) {
    // Any spelling of the field: what is sealed is decided on the parsed JSON below.
    const page = await sql<{ id: number; setting: string }[]>`
      SELECT id, setting FROM users WHERE id > ${after} AND setting LIKE '%webhook_secret%' ORDER BY id LIMIT ${ACCOUNT_PAGE}`;
    for (const { id, setting } of page) {
      const sealed = sealedSetting(sealers.webhooks, Number(id), setting);
      if (sealed === undefined) continue;
      const done = await sql`UPDATE users SET setting = ${sealed} WHERE id = ${id} AND setting = ${setting}`;
      accounts += done.count;
    }
    if (page.length < ACCOUNT_PAGE) break;
    after = Number(page[page.length - 1]!.id);
  }
  return { options, accounts };
}

/** The setting with its webhook secret sealed, or undefined when there is nothing to seal. */
function sealedSetting(webhooks: WebhookSecretSealer, userId: number, setting: string): string | undefined {
  let o: unknown;
  try {
    o = JSON.parse(setting);
  } catch {
    return undefined;
  }
  if (!o || typeof o !== 'object') return undefined;
  const s = o as Record<string, unknown>;
  if (typeof s.webhook_secret !== 'string' || s.webhook_secret === '' || isSealedText(s.webhook_secret)) return undefined;
  s.webhook_secret = webhooks.seal(userId, s.webhook_secret);
  return JSON.stringify(s);
}
