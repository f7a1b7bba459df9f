// The bench's own data in its own database: an account with a big balance and an unlimited key, a
// channel to the mock serving the bench's model names (one per scenario, so the money audit can tell
// the scenarios' rows apart and knows each row's expected usage), and their prices in ModelRatio.
// Idempotent: a second run finds everything again and only refreshes the channel's URL and the balance.
import { insertAccount } from '../../console-api/accounts/account-store.js';
import { hashPassword } from '../../console-api/auth/password.js';
import { rebuildAbilities } from '../../console-api/routes/channel.js';
import type { Config } from '../../infra/config.js';
import type { Sql } from '../../infra/postgres/client.js';
import { createApiKeyCrypto, generateApiKey, maskApiKey } from '../../infra/secrets/api-key-crypto.js';

export const BENCH_USERNAME = 'bench-load';
export const BENCH_PASSWORD = 'bench-load-password';
/** 20 million US dollars: no scenario can run the account dry. */
export const BENCH_BALANCE = 10_000_000_000_000;
const CHANNEL_NAME = 'bench-mock';
const KEY_NAME = 'bench-load-key';

/** Model names the bench sends, with the model ratio it prices them at (completion ratio: the default 5). */
export const BENCH_MODELS: Readonly<Record<string, number>> = {
  'bench-small': 1.5,
  'bench-stream-64': 1.5,
  'bench-long': 0.5,
  'bench-mix': 1.5,
  'bench-mix-error529': 1.5,
  'bench-abort': 0.5,
  'bench-probe': 1.5,
};

export interface BenchFixtures {
  userId: number;
  tokenId: number;
  apiKey: string;
  channelId: number;
}

export async function ensureBenchFixtures(sql: Sql, config: Config, mockUrl: string, mockKey: string): Promise<BenchFixtures> {
  const crypto = createApiKeyCrypto(config.KEY_SECRET);
  const passwordHash = await hashPassword(BENCH_PASSWORD);
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(727300)`;
    let [user] = await tx`SELECT id FROM users WHERE username = ${BENCH_USERNAME}`;
    if (!user) user = { id: (await insertAccount(tx, { username: BENCH_USERNAME, passwordHash })).id };
    const userId = user.id as number;
    await tx`UPDATE users SET quota = ${BENCH_BALANCE}, status = 1, "group" = 'default' WHERE id = ${userId}`;

    const [ratioRow] = await tx`SELECT value FROM options WHERE key = 'ModelRatio'`;
    const ratios = { ...(ratioRow ? (JSON.parse(ratioRow.value as string) as Record<string, number>) : {}), ...BENCH_MODELS };
    await tx`INSERT INTO options (key, value) VALUES ('ModelRatio', ${JSON.stringify(ratios)})
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;

    const models = Object.keys(BENCH_MODELS).join(',');
    let [channel] = await tx`SELECT * FROM channels WHERE name = ${CHANNEL_NAME}`;
    if (!channel) {
      [channel] = await tx`
        INSERT INTO channels (type, name, base_url, key_ciphertext, models, "group")
        VALUES (14, ${CHANNEL_NAME}, ${mockUrl}, ${crypto.seal(mockKey)}, ${models}, 'default') RETURNING *`;
    } else {
      [channel] = await tx`
        UPDATE channels SET base_url = ${mockUrl}, key_ciphertext = ${crypto.seal(mockKey)}, models = ${models},
                            status = 1, "group" = 'default'
        WHERE id = ${channel.id as number} RETURNING *`;
    }
    await rebuildAbilities(tx, channel as never);
    // The bench's channel is the only one: a 529 is passed through, not retried elsewhere.
    await tx`UPDATE channels SET status = 2 WHERE id <> ${channel!.id as number}`;
    await tx`UPDATE abilities SET enabled = false WHERE channel_id <> ${channel!.id as number}`;

    let [token] = await tx`SELECT id, key_ciphertext FROM tokens WHERE user_id = ${userId} AND name = ${KEY_NAME} AND deleted_at IS NULL`;
    let apiKey: string;
    if (token) {
      apiKey = crypto.open(token.key_ciphertext as Buffer);
      await tx`UPDATE tokens SET status = 1, unlimited_quota = true, expired_time = -1 WHERE id = ${token.id as number}`;
    } else {
      apiKey = generateApiKey();
      [token] = await tx`
        INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, unlimited_quota)
        VALUES (${userId}, ${KEY_NAME}, ${crypto.hash(apiKey)}, ${crypto.seal(apiKey)}, ${maskApiKey(apiKey)}, true)
        RETURNING id`;
    }
    return { userId, tokenId: token!.id as number, apiKey, channelId: channel!.id as number };
  });
}
