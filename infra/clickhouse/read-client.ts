// Short reads (a console page, a stat) over ClickHouse's HTTP interface: each one POST of the statement
// (a body of known length), its settings and `param_*` values in the URL, its answer read whole.
//
// Why not @clickhouse/client, which every other statement goes through: its socket pool waits a
// `setTimeout(0)` (1 ms) before every statement (clickhouse-js issue #294) and streams the statement as
// a chunked body. Measured on the bench's data (docs/performance.md, 2026-11-24 16:45): 2.5-2.8 ms of
// the caller's CPU and 10-11 ms of wall time per statement through its query(), against 1.1-1.3 ms and
// 8-8.7 ms with one POST; the console-api's CPU per request fell by 6-50% by query. The values are
// put in the URL by the official client's own `toSearchParams` (@clickhouse/client-common, the code the
// client bundles), so a parameter or setting reaches the server exactly as the client would send it;
// errors are parsed by its parseError into the same ClickHouseError.
//
// Only for reads whose answer fits in memory: the result is read whole (`wait_end_of_query`, so an
// error in the middle of a result is an error status, not a truncated 200).
import { randomUUID } from 'node:crypto';
import { parseError } from '@clickhouse/client';
import { toSearchParams } from '@clickhouse/client-common';
import { Pool } from 'undici';
import type { Config } from '../config.js';
import { clickHouseOptions } from './client.js';

/** Settings by name; a read needs no map-valued setting. */
export type ClickHouseReadSettings = Readonly<Record<string, string | number | boolean | undefined>>;

/** The row formats the reader decodes: one JSON value per line. */
export type ReadFormat = 'JSONEachRow' | 'JSONCompactEachRow';

export interface ClickHouseRead {
  query: string;
  query_params?: Record<string, unknown>;
  format: ReadFormat;
  clickhouse_settings?: ClickHouseReadSettings;
}

export interface ClickHouseReaderOptions {
  url: string;
  database: string;
  username?: string;
  password?: string;
  /** How long the server may stay silent: before its answer's headers, and between its bytes. */
  requestTimeoutMs?: number;
  /** Sockets kept to the server. */
  connections?: number;
  /** How long an idle socket is kept for reuse: below the server's keep-alive timeout. */
  idleSocketMs?: number;
  /** The largest answer a read holds (default MAX_ANSWER_BYTES); a larger one fails the read. */
  maxAnswerBytes?: number;
  /** Settings every statement carries (the statement's own win). */
  settings?: ClickHouseReadSettings;
}

/**
 * ClickHouse could not answer now: not reachable, no answer within the timeout, or refusing for load
 * (its own overload errors). A caller may tell its user to retry; any other failure is a fault of the
 * statement, rethrown as ClickHouse's error.
 */
export class ClickHouseUnavailableError extends Error {
  constructor(message: string, options: { cause: unknown }) {
    super(message, options);
    this.name = 'ClickHouseUnavailableError';
  }
}

/** ClickHouse's error types that say "not now" rather than "not this statement". */
const OVERLOAD_TYPES = new Set([
  'TOO_MANY_SIMULTANEOUS_QUERIES', 'MEMORY_LIMIT_EXCEEDED', 'TIMEOUT_EXCEEDED', 'QUERY_WAS_CANCELLED',
  'TOO_MANY_PARTS', 'NETWORK_ERROR', 'SOCKET_TIMEOUT', 'ALL_CONNECTION_TRIES_FAILED', 'ABORTED',
]);

/** How much of a failed answer becomes the error's message (a proxy's page, a torn row and the exception after it). */
const MAX_ERROR_CHARS = 16 * 1024;

/** An answer larger than this is refused rather than held: these reads are pages and sums. */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

export class ClickHouseReader {
  private readonly pool: Pool;
  private readonly path: string;
  private readonly headers: Record<string, string>;
  private readonly database: string;
  private readonly settings: ClickHouseReadSettings;
  private readonly timeoutMs: number;
  private readonly maxAnswerBytes: number;

  constructor(opts: ClickHouseReaderOptions) {
    const url = new URL(opts.url);
    this.pool = new Pool(url.origin, {
      connections: opts.connections ?? 10,
      keepAliveTimeout: opts.idleSocketMs ?? 2_500,
      keepAliveMaxTimeout: opts.idleSocketMs ?? 2_500,
    });
    this.path = url.pathname.endsWith('/') ? url.pathname : `${url.pathname}/`;
    this.headers = {
      authorization: `Basic ${Buffer.from(`${opts.username ?? 'default'}:${opts.password ?? ''}`).toString('base64')}`,
    };
    this.timeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.maxAnswerBytes = opts.maxAnswerBytes ?? MAX_ANSWER_BYTES;
    this.database = opts.database;
    this.settings = opts.settings ?? {};
  }

  /** The statement's rows, each line of the answer decoded. Rejects with ClickHouse's error. */
  async rows<T>(read: ClickHouseRead): Promise<T[]> {
    const search = toSearchParams({
      database: this.database,
      query_params: read.query_params,
      // The HTTP interface's own parameters travel as settings do.
      clickhouse_settings: { ...this.settings, ...read.clickhouse_settings, default_format: read.format, wait_end_of_query: 1 },
      query_id: randomUUID(),
    });
    let status: number;
    let text: string | undefined;
    try {
      const res = await this.pool.request({
        method: 'POST',
        path: `${this.path}?${search.toString()}`,
        headers: this.headers,
        body: read.query,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      status = res.statusCode;
      // Counted as it comes: an answer sent chunked has no length to check first.
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > this.maxAnswerBytes) break;
        chunks.push(chunk);
      }
      if (size > this.maxAnswerBytes) res.body.destroy();
      else text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, size).toString('utf8');
    } catch (err) {
      // undici's errors: the connection refused, reset or timed out.
      throw new ClickHouseUnavailableError(`ClickHouse did not answer: ${(err as Error).message}`, { cause: err });
    }
    if (text === undefined) throw new Error(`ClickHouse's answer is larger than a read may hold (${this.maxAnswerBytes} bytes)`);
    if (status !== 200) throw classified(parseError(text.slice(0, MAX_ERROR_CHARS) || `ClickHouse answered HTTP ${status}`), status);
    try {
      return decodeLines<T>(text);
    } catch (err) {
      throw classified(err, status);
    }
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}

function classified(err: unknown, status: number): unknown {
  const type = (err as { type?: unknown }).type;
  if (status === 503 || (typeof type === 'string' && OVERLOAD_TYPES.has(type))) {
    return new ClickHouseUnavailableError(`ClickHouse could not answer now: ${(err as Error).message}`, { cause: err });
  }
  return err;
}

/** One JSON value per line; a line that is not JSON is the server's error text. */
function decodeLines<T>(text: string): T[] {
  const rows: T[] = [];
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end === -1) end = text.length;
    if (end > start) {
      const line = text.slice(start, end);
      try {
        rows.push(JSON.parse(line) as T);
      } catch {
        throw parseError(text.slice(start, start + MAX_ERROR_CHARS));
      }
    }
    start = end + 1;
  }
  return rows;
}

/**
 * The console's reader, with createClickHouse's server, database, credentials, timeout, sockets and
 * keep-alive (clickHouseOptions). Its settings stay the reads' own: the services' are for inserts.
 */
export function createClickHouseReader(config: Config, settings?: ClickHouseReadSettings): ClickHouseReader {
  const o = clickHouseOptions(config);
  return new ClickHouseReader({
    url: o.url,
    database: config.CLICKHOUSE_DATABASE,
    username: o.username,
    password: o.password,
    requestTimeoutMs: o.request_timeout,
    connections: o.max_open_connections,
    idleSocketMs: o.keep_alive.idle_socket_ttl,
    settings,
  });
}
