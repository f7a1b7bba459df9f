// Applies a batch of usage events to the book of record, in one Postgres transaction:
//   1. the batch is deduplicated by request id (a stream replay can carry the same event twice);
//   2. each event inserts its ledger row; the UNIQUE request_id makes a replayed event insert nothing;
//   3. only relay events whose ledger row is new move money: the account (quota, used_quota,
//      request_count), the key (remain_quota when limited, used_quota) and the channel (used_quota);
//   4. each ledger row gets its log row (with the ledger id as log id) written to the log_outbox
//      once, in the transaction that makes it count: the one inserting a relay event's ledger row, or
//      the one clearing a console credit's follow-up (the console wrote that ledger row). The worker
//      drains the outbox to ClickHouse (billing/log-outbox.ts): the money never waits for ClickHouse,
//      no committed ledger row lacks its log row, and a replayed event (a stream entry delivered
//      again, a spool replayed) writes none, so ClickHouse's stats count each request once.
//   5. each account (and limited key) it debits gets a new users.credit_seq (tokens.quota_seq): the
//      version of that balance in Postgres, which a mirror refilled from Postgres records
//      (seedBalance-2.lua). A batch whose debits a Redis restart took out of the mirrors compares it
//      with the refilled mirror's to know whether that mirror holds them (billing/mirror-repair.ts).
//   6. an account it would debit that has no users row (a forged event, a row deleted by hand; the
//      console only ever soft-deletes, and a soft-deleted account is debited as any other) fails the
//      transaction with AccountMissingError: its ledger and log rows would have counted as billed
//      with nobody debited (Σ ledger ≠ Σ debits). The worker settles the batch in halves and
//      dead-letters that account's events alone (billing-worker.ts #settleRefusingBadData).
import type { Sql } from '../infra/postgres/client.js';
import { LOG_TYPE, movesMoney, type UsageEvent } from '../core/usage/usage-event.js';
import { toLogRow } from '../core/usage/log-rows.js';
import { queueLowBalanceNotices, type SettledBalance } from './low-balance-notices.js';

export interface SettledEvent {
  id: number;
  event: UsageEvent;
  /** False for a replay whose money had already moved. */
  applied: boolean;
  /** Applied and moving money: users.credit_seq after this batch debited the account. */
  accountSeq?: number;
  /** Applied on a limited key: tokens.quota_seq after this batch debited the key. */
  keySeq?: number;
}

/**
 * Relay events for accounts with no users row: refused for their data, as Postgres refuses a
 * foreign key (SQLSTATE 23503, which the worker's refusedForItsData takes as the event's fault).
 */
export class AccountMissingError extends Error {
  readonly code = '23503';
  readonly userIds: number[];
  constructor(userIds: number[]) {
    super(`usage event for an account that does not exist (no users row for user_id ${userIds.join(', ')}): not billed, nobody would be debited`);
    this.name = 'AccountMissingError';
    this.userIds = userIds;
  }
}

export async function settleBatch(sql: Sql, events: readonly UsageEvent[]): Promise<SettledEvent[]> {
  const unique = new Map<string, UsageEvent>();
  for (const e of events) if (!unique.has(e.request_id)) unique.set(e.request_id, e);
  if (unique.size === 0) return [];
  const batch = [...unique.values()];

  return sql.begin(async (tx) => {
    const inserted = await tx`
      INSERT INTO ledger (request_id, type, user_id, token_id, channel_id, model_name, "group", quota,
                          prompt_tokens, completion_tokens, cache_read_tokens, cache_write_5m_tokens,
                          cache_write_1h_tokens, web_search_requests, protocol, created_at)
      SELECT * FROM unnest(
        ${batch.map((e) => e.request_id)}::text[], ${batch.map((e) => e.type)}::int[],
        ${batch.map((e) => e.user_id)}::bigint[], ${batch.map((e) => e.token_id)}::bigint[],
        ${batch.map((e) => e.channel)}::bigint[], ${batch.map((e) => e.model_name)}::text[],
        ${batch.map((e) => e.group)}::text[], ${batch.map((e) => e.quota)}::bigint[],
        ${batch.map((e) => e.prompt_tokens)}::int[], ${batch.map((e) => e.completion_tokens)}::int[],
        ${batch.map((e) => e.cache_read_tokens ?? 0)}::int[], ${batch.map((e) => e.cache_write_5m_tokens ?? 0)}::int[],
        ${batch.map((e) => e.cache_write_1h_tokens ?? 0)}::int[], ${batch.map((e) => e.web_search_requests ?? 0)}::int[],
        ${batch.map((e) => e.protocol ?? 'anthropic')}::text[], ${batch.map((e) => e.created_at)}::bigint[])
      ON CONFLICT (request_id) DO NOTHING
      RETURNING id, request_id`;
    const ids = new Map<string, number>();
    for (const r of inserted as unknown as { id: number; request_id: string }[]) ids.set(r.request_id, r.id);
    const fresh = batch.filter((e) => ids.has(e.request_id));
    const freshIds = new Set(ids.keys());
    // The events whose log row this transaction writes (step 4).
    const firstLogged = new Set(freshIds);

    const replayed = batch.filter((e) => !ids.has(e.request_id)).map((e) => e.request_id);
    if (replayed.length) {
      const old = await tx`SELECT id, request_id FROM ledger WHERE request_id = ANY(${replayed}::text[])`;
      for (const r of old as unknown as { id: number; request_id: string }[]) ids.set(r.request_id, r.id);
      // A console credit's row (written by the console, so always a replay here) stays pending until
      // its event is settled, so that a stream entry lost before this point is appended again.
      const credits = batch.filter((e) => !movesMoney(e) && !freshIds.has(e.request_id)).map((e) => ids.get(e.request_id)).filter((id) => id !== undefined);
      if (credits.length) {
        const cleared = await tx`UPDATE ledger SET follow_up_pending = false, log_event = NULL WHERE id = ANY(${credits}::bigint[]) AND follow_up_pending RETURNING request_id`;
        for (const r of cleared as unknown as { request_id: string }[]) firstLogged.add(r.request_id);
      }
    }

    const users = new Map<number, { quota: number; requests: number }>();
    const tokens = new Map<number, { used: number; limitedDebit: number; at: number }>();
    const channels = new Map<number, number>();
    for (const e of fresh) {
      // Console events (top-up, management) moved their money in the console's own transaction.
      if (!movesMoney(e)) continue;
      const u = users.get(e.user_id) ?? { quota: 0, requests: 0 };
      u.quota += e.quota;
      if (e.type === LOG_TYPE.consume) u.requests += 1;
      users.set(e.user_id, u);
      if (e.token_id > 0) {
        const t = tokens.get(e.token_id) ?? { used: 0, limitedDebit: 0, at: 0 };
        t.used += e.quota;
        if (e.token_limited) t.limitedDebit += e.quota;
        t.at = Math.max(t.at, e.created_at);
        tokens.set(e.token_id, t);
      }
      if (e.channel > 0) channels.set(e.channel, (channels.get(e.channel) ?? 0) + e.quota);
    }
    const accountSeqs = new Map<number, number>();
    const keySeqs = new Map<number, number>();
    if (users.size) {
      const balances = await tx<(SettledBalance & { credit_seq: number | string })[]>`
        UPDATE users SET quota = users.quota - d.q, used_quota = users.used_quota + d.q,
                         request_count = users.request_count + d.n, credit_seq = users.credit_seq + 1
        FROM unnest(${[...users.keys()]}::bigint[], ${[...users.values()].map((u) => u.quota)}::bigint[],
                    ${[...users.values()].map((u) => u.requests)}::bigint[]) AS d(id, q, n)
        WHERE users.id = d.id
        RETURNING users.id, users.quota, d.q AS debit, users.setting, users.credit_seq`;
      for (const b of balances) accountSeqs.set(Number(b.id), Number(b.credit_seq));
      // Step 6: every account debited must have been found; the transaction rolls back otherwise.
      if (accountSeqs.size < users.size) throw new AccountMissingError([...users.keys()].filter((id) => !accountSeqs.has(id)));
      // A balance this batch took below its owner's warning threshold: the notice commits with the debit.
      await queueLowBalanceNotices(tx, balances, Math.floor(Date.now() / 1000));
    }
    if (tokens.size) {
      const keys = await tx<{ id: number | string; quota_seq: number | string }[]>`
        UPDATE tokens SET remain_quota = tokens.remain_quota - d.debit, used_quota = tokens.used_quota + d.used,
                          accessed_time = GREATEST(tokens.accessed_time, d.at),
                          quota_seq = tokens.quota_seq + (d.debit <> 0)::int
        FROM unnest(${[...tokens.keys()]}::bigint[], ${[...tokens.values()].map((t) => t.limitedDebit)}::bigint[],
                    ${[...tokens.values()].map((t) => t.used)}::bigint[], ${[...tokens.values()].map((t) => t.at)}::bigint[])
             AS d(id, debit, used, at)
        WHERE tokens.id = d.id
        RETURNING tokens.id, tokens.quota_seq`;
      for (const k of keys) keySeqs.set(Number(k.id), Number(k.quota_seq));
    }
    if (channels.size) {
      await tx`
        UPDATE channels SET used_quota = channels.used_quota + d.q
        FROM unnest(${[...channels.keys()]}::bigint[], ${[...channels.values()]}::bigint[]) AS d(id, q)
        WHERE channels.id = d.id`;
    }
    const settled = batch.map((event): SettledEvent => {
      const s: SettledEvent = { id: ids.get(event.request_id)!, event, applied: freshIds.has(event.request_id) };
      if (s.applied && movesMoney(event)) {
        s.accountSeq = accountSeqs.get(event.user_id);
        if (event.token_limited && event.token_id > 0) s.keySeq = keySeqs.get(event.token_id);
      }
      return s;
    });
    const logged = settled.filter((s) => firstLogged.has(s.event.request_id));
    if (logged.length) {
      // The rows as one text, a JSON object a line (JSON.stringify escapes every newline inside a
      // value), split in Postgres and stored as text: a text[] of JSON texts had every quote of every
      // row escaped in JavaScript, and JSONB made Postgres parse each row on insert and print it again
      // on the drain (docs/performance.md, "The log outbox's rows as text"). The `text` cast keeps
      // postgres.js from encoding the string once more.
      await tx`
        INSERT INTO log_outbox (id, row)
        SELECT * FROM unnest(${logged.map((s) => s.id)}::bigint[],
                             string_to_array(${logged.map((s) => JSON.stringify(toLogRow(s))).join('\n')}::text, E'\n'))
        ON CONFLICT (id) DO NOTHING`;
    }
    return settled;
  });
}
