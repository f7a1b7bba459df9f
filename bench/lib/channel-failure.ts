// The errors scenario's channel failing mid-run (issue 13): a second bench channel to the same mock,
// at a higher priority and serving only `bench-mix`, whose provider key the mock is told to revoke
// part-way through the relay run (PUT /mock/key-failures, the mock started with control). The relay
// must retry every request it fails on the other channel, disable it automatically, and the money
// audit must still pass: a refused attempt bills nothing, the answer of the other channel once.
// Own-stack runs only: an attached mock cannot be told to fail.
import { rebuildAbilities } from '../../console-api/channels/abilities.js';
import type { Config } from '../../infra/config.js';
import type { Sql } from '../../infra/postgres/client.js';
import { createApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';

export const FAILING_CHANNEL_NAME = 'bench-mock-failing';
/** A key the bench's mock accepts (MOCK_API_KEYS) until it is told to revoke it. */
export const FAILING_CHANNEL_KEY = 'sk-ant-mock-bench-failing';
/** The mix's plain text model only: the audit knows its usage whichever channel answers. */
const FAILING_CHANNEL_MODELS = ['bench-mix'];

export interface ChannelFailure {
  channelId: number;
  /** Seconds into the relay run at which the key was revoked. */
  revokedAtSec: number;
  /** The channel was disabled automatically (status 3) by the end of the run, or within DISABLE_GRACE_MS after it. */
  disabled: boolean;
  statusReason: string;
}

/** The failing channel, enabled again at priority 10 (above bench-mock's 0). */
export async function ensureFailingChannel(sql: Sql, config: Config, mockUrl: string): Promise<number> {
  const sealed = createApiKeyCrypto(config.KEY_SECRET).seal(FAILING_CHANNEL_KEY);
  return sql.begin(async (tx) => {
    let [channel] = await tx`SELECT id FROM channels WHERE name = ${FAILING_CHANNEL_NAME}`;
    const models = FAILING_CHANNEL_MODELS.join(',');
    [channel] = channel
      ? await tx`UPDATE channels SET base_url = ${mockUrl}, key_ciphertext = ${sealed}, models = ${models}, "group" = 'default',
                                    status = 1, priority = 10, auto_ban = true, fault_threshold = NULL, status_reason = ''
                 WHERE id = ${channel.id as number} RETURNING *`
      : await tx`INSERT INTO channels (type, name, base_url, key_ciphertext, models, "group", priority)
                 VALUES (14, ${FAILING_CHANNEL_NAME}, ${mockUrl}, ${sealed}, ${models}, 'default', 10) RETURNING *`;
    await rebuildAbilities(tx, channel as never);
    return channel!.id as number;
  });
}

/**
 * How long after the run the disabling may still land: it is asynchronous by design (a fault's record
 * and the Postgres write are never awaited by the request, and a success reported by a flush, every
 * CHANNEL_HEALTH_FLUSH_MS, resets the consecutive count), so a run of a second on a loaded machine
 * can end before it (CI of 2026-12-02: the tiny bench's 0.7 s after the revocation).
 */
const DISABLE_GRACE_MS = 5_000;

async function setKeyFailure(mockUrl: string, failure: 'revoked' | null): Promise<void> {
  const res = await fetch(`${mockUrl}/mock/key-failures`, { method: 'PUT', body: JSON.stringify({ [FAILING_CHANNEL_KEY]: failure }) });
  if (!res.ok) throw new Error(`the mock refused PUT /mock/key-failures: HTTP ${res.status}`);
}

/**
 * Revokes the failing channel's key `afterMs` into `run`, and accepts it again once the run is over
 * (the console's prober re-enables the channel later, on its own schedule).
 */
export async function failChannelDuring<T>(sql: Sql, mockUrl: string, channelId: number, afterMs: number, run: () => Promise<T>): Promise<{ result: T; failure: ChannelFailure }> {
  await setKeyFailure(mockUrl, null);
  const started = Date.now();
  let revokedAt = 0;
  const timer = setTimeout(() => {
    revokedAt = Date.now();
    setKeyFailure(mockUrl, 'revoked').catch(() => {});
  }, afterMs);
  try {
    const result = await run();
    const graceEnds = Date.now() + DISABLE_GRACE_MS;
    let row;
    for (;;) {
      [row] = await sql`SELECT status, status_reason FROM channels WHERE id = ${channelId}`;
      if (Number(row?.status) === 3 || Date.now() >= graceEnds) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return {
      result,
      failure: {
        channelId, revokedAtSec: revokedAt ? (revokedAt - started) / 1000 : -1,
        disabled: Number(row?.status) === 3, statusReason: (row?.status_reason as string | undefined) ?? '',
      },
    };
  } finally {
    clearTimeout(timer);
    await setKeyFailure(mockUrl, null).catch(() => {});
  }
}
