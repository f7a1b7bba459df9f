// The bench's own data in its own database: an account with a big balance and an unlimited key, a
// channel to the mock serving the bench's model names (one per scenario, so the money audit can tell
// the scenarios' rows apart and knows each row's expected usage), and their prices in ModelRatio.
// Given the OpenAI-format mock (own stack), a second channel, of type 1 (OpenAI format), serves the
// `bench-oai-*` models from it, and the Anthropic channel serves the others only: the relay routes a
// model by the abilities (group × model) of the enabled channels, so each model has one channel.
// Idempotent: a second run finds everything again and only refreshes the channel's URL and the balance.
// On the bench's own database the bench channel is made the only one (exclusive); on a running
// stack's database (attached mode) the other channels are left alone: the bench's model names are
// served by its channel only, so a 529 still has no other channel to be retried on.
import { insertAccount } from '../../console-api/accounts/account-store.js';
import { hashPassword } from '../../console-api/auth/password.js';
import { rebuildAbilities } from '../../console-api/channels/abilities.js';
import type { Config } from '../../infra/config.js';
import type { Sql } from '../../infra/postgres/client.js';
import { createApiKeyCrypto, generateApiKey, maskApiKey } from '../../infra/secrets/api-key-crypto.js';

export const BENCH_USERNAME = 'bench-load';
export const BENCH_PASSWORD = 'bench-load-password';
/**
 * 20 million US dollars: no scenario can run the account dry, and the open reservations never come
 * near it (a media request reserves its model's whole context window, 200,000 × 1.5 + 16 × 5 × 1.5 =
 * 300,120 quota; 32 of them in flight hold under 10 million).
 */
export const BENCH_BALANCE = 10_000_000_000_000;
const CHANNEL_NAME = 'bench-mock';
export const OPENAI_CHANNEL_NAME = 'bench-mock-openai';
/** new-api's channel type of an OpenAI-format (Chat Completions) provider (core/channels/output-limit.ts). */
const OPENAI_CHANNEL_TYPE = 1;
const KEY_NAME = 'bench-load-key';

/** Model names the bench sends, with the model ratio it prices them at (completion ratio: the default 5). */
export const BENCH_MODELS: Readonly<Record<string, number>> = {
  'bench-small': 1.5,
  'bench-stream-64': 1.5,
  'bench-long': 0.5,
  'bench-mix': 1.5,
  'bench-mix-error529': 1.5,
  'bench-mix-image': 1.5,
  'bench-mix-document': 1.5,
  'bench-mix-media': 1.5,
  'bench-abort': 0.5,
  'bench-agent': 1.5,
  'bench-chat': 1.5,
  'bench-chat-stream-64': 1.5,
  // Served by the OpenAI-format channel (OPENAI_CHANNEL_MODELS).
  'bench-oai-stream-64': 1.5,
  'bench-oai-chat': 1.5,
  'bench-oai-chat-stream-64': 1.5,
  'bench-probe': 1.5,
};

/** The models of the OpenAI-format channel (type 1, the OpenAI-format mock); every other bench model is the Anthropic channel's. */
export const OPENAI_CHANNEL_MODELS: readonly string[] = Object.keys(BENCH_MODELS).filter((m) => m.startsWith('bench-oai-'));
const ANTHROPIC_CHANNEL_MODELS: readonly string[] = Object.keys(BENCH_MODELS).filter((m) => !OPENAI_CHANNEL_MODELS.includes(m));

export interface BenchFixtures {
  userId: number;
  tokenId: number;
  apiKey: string;
  channelId: number;
  /** The OpenAI-format channel, when an OpenAI-format mock was given. */
  openaiChannelId: number | undefined;
  /** users.quota after − before (the balance is reset to BENCH_BALANCE): the Redis mirror must move by as much. */
  quotaDelta: number;
}

function opens(crypto: ReturnType<typeof createApiKeyCrypto>, sealed: Buffer): boolean {
  try {
    crypto.open(sealed);
    return true;
  } catch {
    return false;
  }
}

export interface FixtureOptions {
  /** Disable every other channel (the bench's own database). Default true. */
  exclusive?: boolean;
  /** The OpenAI-format mock: a channel of type 1 to it serves OPENAI_CHANNEL_MODELS. Absent: no such channel (attached mode). */
  openai?: { url: string; key: string };
}

export async function ensureBenchFixtures(sql: Sql, config: Config, mockUrl: string, mockKey: string, o: FixtureOptions = {}): Promise<BenchFixtures> {
  const exclusive = o.exclusive ?? true;
  const crypto = createApiKeyCrypto(config.KEY_SECRET);
  const passwordHash = await hashPassword(BENCH_PASSWORD);
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(727300)`;
    // A running stack's database: the secret must open what is sealed there already, or the bench
    // would write a channel credential and a key its relay cannot read.
    const [sealed] = await tx`
      (SELECT key_ciphertext FROM tokens WHERE deleted_at IS NULL AND name <> ${KEY_NAME} AND key_ciphertext IS NOT NULL LIMIT 1)
      UNION ALL (SELECT key_ciphertext FROM channels WHERE name <> ${CHANNEL_NAME} AND key_ciphertext IS NOT NULL LIMIT 1) LIMIT 1`;
    if (sealed && !opens(crypto, sealed.key_ciphertext as Buffer)) {
      throw new Error('KEY_SECRET does not open the API keys stored in this database: give the stack\'s own (--key-secret-file, --key-secret or KEY_SECRET)');
    }
    let [user] = await tx`SELECT id, quota FROM users WHERE username = ${BENCH_USERNAME} FOR UPDATE`;
    if (!user) {
      const id = (await insertAccount(tx, { username: BENCH_USERNAME, passwordHash })).id;
      [user] = await tx`SELECT id, quota FROM users WHERE id = ${id}`;
    }
    const userId = user!.id as number;
    const quotaDelta = BENCH_BALANCE - Number(user!.quota);
    await tx`UPDATE users SET quota = ${BENCH_BALANCE}, status = 1, "group" = 'default' WHERE id = ${userId}`;

    const [ratioRow] = await tx`SELECT value FROM options WHERE key = 'ModelRatio'`;
    const ratios = { ...(ratioRow ? (JSON.parse(ratioRow.value as string) as Record<string, number>) : {}), ...BENCH_MODELS };
    await tx`INSERT INTO options (key, value) VALUES ('ModelRatio', ${JSON.stringify(ratios)})
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;

    const models = ANTHROPIC_CHANNEL_MODELS.join(',');
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
    let openaiChannel: Record<string, unknown> | undefined;
    if (o.openai) {
      const sealedKey = crypto.seal(o.openai.key);
      const openaiModels = OPENAI_CHANNEL_MODELS.join(',');
      [openaiChannel] = await tx`SELECT id FROM channels WHERE name = ${OPENAI_CHANNEL_NAME}`;
      [openaiChannel] = openaiChannel
        ? await tx`UPDATE channels SET type = ${OPENAI_CHANNEL_TYPE}, base_url = ${o.openai.url}, key_ciphertext = ${sealedKey}, models = ${openaiModels},
                                      status = 1, "group" = 'default', model_mapping = ''
                   WHERE id = ${openaiChannel.id as number} RETURNING *`
        : await tx`INSERT INTO channels (type, name, base_url, key_ciphertext, models, "group")
                   VALUES (${OPENAI_CHANNEL_TYPE}, ${OPENAI_CHANNEL_NAME}, ${o.openai.url}, ${sealedKey}, ${openaiModels}, 'default') RETURNING *`;
      await rebuildAbilities(tx, openaiChannel as never);
    }
    const ours = [channel!.id as number, ...(openaiChannel ? [openaiChannel.id as number] : [])];
    if (exclusive) {
      // Its mock runs on this machine: the relay connects to private addresses only when allowed
      // (core/net/outbound-guard.ts). Attached to an operator's stack, the operator's setting stands.
      await tx`INSERT INTO options (key, value) VALUES ('ChannelAllowPrivateNetworks', 'true') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
      // The bench's channels are the only ones: a 529 is passed through, not retried elsewhere.
      await tx`UPDATE channels SET status = 2 WHERE id <> ALL(${ours}::bigint[])`;
      await tx`UPDATE abilities SET enabled = false WHERE channel_id <> ALL(${ours}::bigint[])`;
    } else {
      const others = await tx`
        SELECT DISTINCT a.channel_id FROM abilities a JOIN channels c ON c.id = a.channel_id
        WHERE a.enabled AND c.status = 1 AND a.channel_id <> ALL(${ours}::bigint[]) AND a.model = ANY(${Object.keys(BENCH_MODELS)})`;
      if (others.length) {
        throw new Error(`channels ${others.map((r) => r.channel_id as number).join(', ')} also serve the bench's model names (bench-*): ` +
          'the relay would retry on them and the audit could not tell; disable them or bench a separate database');
      }
    }

    let [token] = await tx`SELECT id, key_ciphertext FROM tokens WHERE user_id = ${userId} AND name = ${KEY_NAME} AND deleted_at IS NULL`;
    let apiKey: string;
    if (token && !opens(crypto, token.key_ciphertext as Buffer)) {
      // Sealed with another secret (an earlier run given the wrong one): retire it, make a new one.
      await tx`UPDATE tokens SET deleted_at = EXTRACT(EPOCH FROM now())::BIGINT WHERE id = ${token.id as number}`;
      token = undefined;
    }
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
    return { userId, tokenId: token!.id as number, apiKey, channelId: channel!.id as number, openaiChannelId: openaiChannel?.id as number | undefined, quotaDelta };
  });
}
