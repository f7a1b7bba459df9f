// ClickHouse's HTTP interface over the embedded chdb engine, so that services use @clickhouse/client
// against a local data directory exactly as against a real server. Only what the client uses is
// implemented: /ping, queries by URL and/or body, `database`, `param_*` (parsed by the engine as their
// placeholders' types, never spliced into the statement: below), settings, `default_format`, gzip both
// ways, user/password, and ClickHouse's error format.
//
// chdb binds one data directory per process, and since chdb 3.1 any number of connections (Sessions)
// to it, each with its own state (current database, `SET`) and running its statements in parallel
// with the others'. The server keeps a pool of them (`connections`): a read takes a free one, so a
// console query no longer waits behind every other statement; writes (INSERT, DDL, anything that is
// not a read) also take one, but one write at a time, as before (migration 009's first-seen filter
// needed it; kept, as a real server's billing also sends one log insert at a time:
// billing/log-outbox.ts).
//
// Query parameters are not bound with chdb's queryBindAsync: chdb runs every parameterized statement
// of the process through one queue (its libchdb does not isolate parameters between connections). They
// go in the statement's own engine call as `SET param_<name> = '<value>'`, the value exactly as the
// HTTP interface received it and quoted as a string literal; the engine parses it as the placeholder's
// type, as the server does with param_<name> URL parameters.
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { Session, drainPending } from 'chdb';
import type { Logger } from 'pino';
import { DEFAULT_LOCAL_CONNECTIONS, DEFAULT_LOCAL_UNCOMPRESSED_CACHE_MB } from './local-defaults.js';

export interface LocalClickHouseOptions {
  host: string;
  port: number;
  dataPath: string;
  /** The one accepted user; default 'default'. */
  user?: string;
  /** Its password; default '' (no password). */
  password?: string;
  logger?: Logger;
  /** Extra engine arguments, e.g. `--config-file=...` (remote_servers, macros): chdb's connectionArgs. */
  connectionArgs?: string[];
  /** Engine connections, i.e. statements that can run at once; default DEFAULT_LOCAL_CONNECTIONS. */
  connections?: number;
  /** The engine's cache of decompressed blocks (`uncompressed_cache_size`), MiB; default DEFAULT_LOCAL_UNCOMPRESSED_CACHE_MB, 0: none. */
  uncompressedCacheMb?: number;
}

/** How long close() lets the requests in progress finish before it cuts their connections. */
const CLOSE_GRACE_MS = 3_000;

export interface LocalClickHouse {
  port: number;
  close(): Promise<void>;
}

// URL parameters that are part of the HTTP protocol (or are handled here) rather than settings the
// engine should see. Everything else is passed to the engine with SET, which rejects unknown names
// with UNKNOWN_SETTING just as the server does.
const PROTOCOL_PARAMS = new Set([
  'query', 'database', 'default_format', 'query_id', 'session_id', 'session_timeout', 'session_check',
  'user', 'password', 'quota_key', 'role', 'compress', 'decompress', 'buffer_size', 'wait_end_of_query',
  'enable_http_compression', 'http_zlib_compression_level', 'send_progress_in_http_headers',
  'http_headers_progress_interval_ms', 'http_response_buffer_size', 'http_wait_end_of_query',
  'http_write_exception_in_output_format', 'http_native_compression_disable_checksumming_on_decompress',
]);

// The errors the HTTP handler answers with a status other than 500, by name
// (src/Server/HTTP/exceptionCodeToHTTPStatus.cpp).
const STATUS_BY_TYPE = new Map<string, number>(
  Object.entries({
    401: 'REQUIRED_PASSWORD',
    403: 'UNKNOWN_USER WRONG_PASSWORD AUTHENTICATION_FAILED SET_NON_GRANTED_ROLE ACCESS_DENIED',
    400: 'BAD_ARGUMENTS CANNOT_COMPILE_REGEXP CANNOT_PARSE_TEXT CANNOT_PARSE_ESCAPE_SEQUENCE CANNOT_PARSE_QUOTED_STRING '
      + 'CANNOT_PARSE_DATE CANNOT_PARSE_DATETIME CANNOT_PARSE_NUMBER CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING '
      + 'CANNOT_PARSE_IPV4 CANNOT_PARSE_IPV6 CANNOT_PARSE_INPUT_ASSERTION_FAILED CANNOT_PARSE_UUID DUPLICATE_COLUMN '
      + 'ILLEGAL_COLUMN UNKNOWN_ELEMENT_IN_AST UNKNOWN_TYPE_OF_AST_NODE THERE_IS_NO_COLUMN TOO_DEEP_AST TOO_BIG_AST '
      + 'UNEXPECTED_AST_STRUCTURE SYNTAX_ERROR INCORRECT_DATA TYPE_MISMATCH VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE',
    404: 'UNKNOWN_TABLE UNKNOWN_FUNCTION UNKNOWN_IDENTIFIER UNKNOWN_TYPE UNKNOWN_STORAGE UNKNOWN_DATABASE UNKNOWN_SETTING '
      + 'UNKNOWN_DIRECTION_OF_SORTING UNKNOWN_AGGREGATE_FUNCTION UNKNOWN_FORMAT UNKNOWN_DATABASE_ENGINE '
      + 'UNKNOWN_TYPE_OF_QUERY UNKNOWN_ROLE',
    413: 'QUERY_IS_TOO_LARGE',
    501: 'NOT_IMPLEMENTED',
    503: 'SOCKET_TIMEOUT CANNOT_OPEN_FILE CANNOT_SCHEDULE_TASK',
    411: 'HTTP_LENGTH_REQUIRED',
    408: 'TIMEOUT_EXCEEDED',
    415: 'UNSUPPORTED_MEDIA_TYPE',
  }).flatMap(([status, names]) => names.split(' ').map((name) => [name, Number(status)] as const)),
);

class ClickHouseHttpError extends Error {
  constructor(
    readonly code: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

const CONTENT_TYPES: [RegExp, string][] = [
  [/^JSON.*EachRow|^NDJSON/i, 'application/x-ndjson; charset=UTF-8'],
  [/^JSON/i, 'application/json; charset=UTF-8'],
  [/^(TSV|TabSeparated)/i, 'text/tab-separated-values; charset=UTF-8'],
  [/^CSV/i, 'text/csv; charset=UTF-8; header=absent'],
];

function contentType(format: string): string {
  return CONTENT_TYPES.find(([re]) => re.test(format))?.[1] ?? 'text/plain; charset=UTF-8';
}

// The raw-insert formats chdb accepts as bytes (see chdb's RawInsertFormat).
const RAW_INSERT_FORMATS = new Set([
  'JSONEachRow', 'JSONCompactEachRow', 'CSV', 'CSVWithNames', 'TSV', 'TabSeparated', 'TSVWithNames',
  'TabSeparatedWithNames',
]);
type RawInsertFormat = 'JSONEachRow' | 'JSONCompactEachRow' | 'CSV' | 'CSVWithNames' | 'TSV' | 'TabSeparated'
  | 'TSVWithNames' | 'TabSeparatedWithNames';
const IDENT = '[A-Za-z_][A-Za-z0-9_]*';
const IDENT_RE = new RegExp(`^${IDENT}$`);
// Statements that only read: they run on any free connection, in parallel. Anything else is a write.
const READ_STATEMENT = /^[\s(]*(?:SELECT|WITH|SHOW|DESC|DESCRIBE|EXPLAIN|EXISTS)\b/i;
const SIMPLE_INSERT = new RegExp(
  `^\\s*INSERT\\s+INTO\\s+(?:TABLE\\s+)?(${IDENT}(?:\\.${IDENT})?)\\s*(?:\\(([^)]*)\\))?\\s*FORMAT\\s+(\\w+)\\s*$`,
  'i',
);

interface ParsedRequest {
  query: string;
  body: Buffer; // data after the query (INSERT), empty for other statements
  database: string;
  format: string;
  settings: [string, string][];
  /** name → the value as received (ClickHouse's escaped text form), parsed by the engine. */
  params: Record<string, string>;
}

/** One engine connection and the state it holds between statements. */
interface Lane {
  session: Session;
  /** undefined: unknown (a statement may have run `USE`). */
  database: string | undefined;
  /** The settings it holds (name → value), so that equal settings cost no SET at all. */
  settings: Map<string, string>;
  /** The names of the query parameters it holds, to refuse a statement that would read a stale one. */
  params: Set<string>;
}

export async function startLocalClickHouse(options: LocalClickHouseOptions): Promise<LocalClickHouse> {
  mkdirSync(options.dataPath, { recursive: true });
  // Console reads ask for the cache of decompressed blocks (console-api/logs/log-query.ts); a server
  // has none unless given a size.
  const cacheBytes = Math.max(0, Math.trunc((options.uncompressedCacheMb ?? DEFAULT_LOCAL_UNCOMPRESSED_CACHE_MB) * 1024 * 1024));
  const sessionOptions = { connectionArgs: [`--uncompressed_cache_size=${cacheBytes}`, ...(options.connectionArgs ?? [])] };
  const count = Math.max(1, Math.trunc(options.connections ?? DEFAULT_LOCAL_CONNECTIONS));
  const lanes: Lane[] = [];
  for (let i = 0; i < count; i++) {
    lanes.push({ session: new Session(options.dataPath, sessionOptions), database: 'default', settings: new Map(), params: new Set() });
  }
  const expectedUser = options.user ?? 'default';
  const expectedPassword = options.password ?? '';

  // Free lanes, and the statements waiting for one in arrival order.
  const idle = [...lanes];
  const waiting: Array<(lane: Lane) => void> = [];
  async function onLane<T>(fn: (lane: Lane) => Promise<T>): Promise<T> {
    const lane = idle.pop() ?? (await new Promise<Lane>((resolve) => waiting.push(resolve)));
    try {
      return await fn(lane);
    } finally {
      const next = waiting.shift();
      if (next) next(lane);
      else idle.push(lane);
    }
  }
  let writes: Promise<unknown> = Promise.resolve();
  function oneWriteAtATime<T>(fn: () => Promise<T>): Promise<T> {
    const run = writes.then(fn, fn);
    writes = run.catch(() => {});
    return run;
  }

  const first = await lanes[0]!.session.queryAsync('SELECT version() AS v, timezone() AS tz', { format: 'JSONEachRow' });
  const { v: version, tz: timezone } = first.json<{ v: string; tz: string }>();

  // Statements accepted and not finished, queued ones included: close() waits for them before it closes
  // the engine connections under them.
  let running = 0;
  let allDone: (() => void) | undefined;
  async function execute(r: ParsedRequest) {
    const run = () => onLane((lane) => executeOn(lane, r));
    running++;
    try {
      return await (READ_STATEMENT.test(r.query) && r.body.length === 0 ? run() : oneWriteAtATime(run));
    } finally {
      if (--running === 0) allDone?.();
    }
  }

  async function executeOn(lane: Lane, r: ParsedRequest) {
    const { session } = lane;
    if (r.database !== lane.database) {
      lane.database = undefined;
      await session.queryAsync(`USE ${quoteIdent(r.database)}`);
      lane.database = r.database;
    }
    if (/^\s*USE\b/i.test(r.query)) lane.database = undefined;
    await applySettings(lane, r.settings);
    const paramNames = Object.keys(r.params);
    const insert = r.body.length > 0 && paramNames.length === 0 ? SIMPLE_INSERT.exec(r.query) : null;
    const columns = insert?.[2]?.split(',').map((c) => c.trim().replace(/^`(.*)`$/, '$1'));
    if (insert && RAW_INSERT_FORMATS.has(insert[3]!) && (columns ?? []).every((c) => IDENT_RE.test(c))) {
      // Bytes go to the engine's parser untouched (no string round trip), and we learn rows written.
      const s = await session.insert({
        table: insert[1]!,
        values: r.body,
        format: insert[3] as RawInsertFormat,
        ...(columns?.length ? { columns } : {}),
      });
      return { output: Buffer.alloc(0), readRows: 0, readBytes: 0, writtenRows: s.rowsWritten, writtenBytes: s.bytesWritten, elapsed: s.elapsed };
    }
    // A placeholder this request gives no value for must fail as on the server ("not set"), not read
    // the value an earlier statement left on this connection.
    for (const name of placeholderTypes(r.query).keys()) {
      if (!(name in r.params) && lane.params.has(name)) {
        throw new ClickHouseHttpError(456, 'UNKNOWN_QUERY_PARAMETER', `Substitution \`${name}\` is not set.`);
      }
    }
    const sql = r.body.length > 0 ? `${r.query}\n${r.body.toString('utf8')}` : r.query;
    const setParams = paramNames.length
      ? `SET ${paramNames.map((name) => `param_${name} = ${quoteString(r.params[name]!)}`).join(', ')};\n`
      : '';
    for (const name of paramNames) lane.params.add(name);
    const result = await session.queryAsync(setParams + sql, { format: r.format });
    return { output: Buffer.from(result.bytes()), readRows: result.rowsRead, readBytes: result.bytesRead, writtenRows: 0, writtenBytes: 0, elapsed: result.elapsed };
  }

  // The client sends the same settings with every request (date_time_input_format at least); setting
  // them before and resetting them after each query was two more engine calls per statement. A request
  // gets exactly its own settings: the others' are reset to DEFAULT first, in the same SET.
  async function applySettings(lane: Lane, wanted: [string, string][]): Promise<void> {
    const held = lane.settings;
    const want = new Map(wanted);
    const changes: string[] = [];
    for (const [name] of held) if (!want.has(name)) changes.push(`${name} = DEFAULT`);
    for (const [name, value] of want) if (held.get(name) !== value) changes.push(`${name} = ${quoteString(value)}`);
    if (!changes.length) return;
    try {
      await lane.session.queryAsync(`SET ${changes.join(', ')}`);
    } catch (err) {
      // An unknown name or a bad value: back to every default, one by one (an unknown name must not
      // keep the others from being reset), and the request fails as the server's would.
      for (const name of new Set([...held.keys(), ...want.keys()])) {
        await lane.session.queryAsync(`SET ${name} = DEFAULT`).catch(() => {});
      }
      held.clear();
      throw err;
    }
    for (const [name] of [...held]) if (!want.has(name)) held.delete(name);
    for (const [name, value] of want) held.set(name, value);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const queryId = url.searchParams.get('query_id') || randomUUID();
    const compress = url.searchParams.get('enable_http_compression') === '1' ? pickEncoding(req) : undefined;
    const headers: Record<string, string> = {
      'X-ClickHouse-Server-Display-Name': 'chdb-local',
      'X-ClickHouse-Query-Id': queryId,
      'X-ClickHouse-Timezone': timezone,
    };
    const send = (status: number, body: Buffer, extra: Record<string, string>) => {
      const out = compress ? compressWith(compress, body) : body;
      res.writeHead(status, { ...headers, ...extra, ...(compress ? { 'Content-Encoding': compress } : {}), 'Content-Length': String(out.length) });
      res.end(out);
    };
    try {
      const isHealth = req.method === 'GET' || req.method === 'HEAD';
      if (url.pathname === '/ping' || (url.pathname === '/' && isHealth && !url.searchParams.has('query'))) {
        return send(200, Buffer.from('Ok.\n'), { 'Content-Type': 'text/html; charset=UTF-8' });
      }
      if (url.pathname !== '/') {
        throw new ClickHouseHttpError(0, 'NOT_FOUND', `There is no handle ${url.pathname}`);
      }
      authenticate(req, url, expectedUser, expectedPassword);
      const r = await readRequest(req, url);
      const out = await execute(r);
      const summary = {
        read_rows: String(out.readRows), read_bytes: String(out.readBytes),
        written_rows: String(out.writtenRows), written_bytes: String(out.writtenBytes),
        total_rows_to_read: String(out.readRows), result_rows: String(out.writtenRows),
        result_bytes: String(out.writtenBytes), elapsed_ns: String(Math.round(out.elapsed * 1e9)),
      };
      send(200, out.output, {
        'Content-Type': contentType(r.format),
        'X-ClickHouse-Format': r.format,
        'X-ClickHouse-Summary': JSON.stringify(summary),
      });
    } catch (err) {
      const { code, type, message } = toClickHouseError(err);
      const status = code === 0 ? 404 : (STATUS_BY_TYPE.get(type) ?? 500);
      options.logger?.debug({ code, type, queryId }, 'query failed');
      // Same text the server sends, so that @clickhouse/client's parseError finds code and type.
      const body = code === 0
        ? `${message}\n`
        : `Code: ${code}. DB::Exception: ${message} (${type}) (version ${version} (official build))\n`;
      send(status, Buffer.from(body), {
        'Content-Type': 'text/plain; charset=UTF-8',
        ...(code ? { 'X-ClickHouse-Exception-Code': String(code) } : {}),
      });
    }
  }

  const server = createServer((req, res) => {
    // Stopping: this answer is the connection's last, so a client that keeps reusing its socket lets go.
    if (closing) res.shouldKeepAlive = false;
    handle(req, res).catch((err) => {
      options.logger?.error({ err }, 'local clickhouse handler crashed');
      res.destroy();
    });
  });
  // Longer than the client's idle-socket TTL, so the client never reuses a socket we are closing.
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  options.logger?.info({ host: options.host, port, dataPath: options.dataPath, version }, 'local clickhouse (chdb) listening');

  let closing: Promise<void> | undefined;
  return {
    port,
    close() {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        // server.close() waits for every connection to end, and a kept-alive one only ends when its
        // client hangs up: idle ones are closed now, busy ones after their answer (above), and what
        // is still open after the grace (a client that never stops sending) is cut.
        server.closeIdleConnections();
        const cut = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
        await stopped;
        clearTimeout(cut);
        if (running > 0) await new Promise<void>((resolve) => { allDone = resolve; });
        for (const lane of lanes) lane.session.close();
        await drainPending();
      })();
      return closing;
    },
  };
}

function authenticate(req: IncomingMessage, url: URL, user: string, password: string): void {
  let gotUser = header(req, 'x-clickhouse-user');
  let gotKey = header(req, 'x-clickhouse-key');
  const auth = header(req, 'authorization');
  if (gotUser === undefined && auth?.startsWith('Basic ')) {
    const decoded = Buffer.from(auth.slice(6), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    gotUser = colon < 0 ? decoded : decoded.slice(0, colon);
    gotKey = colon < 0 ? '' : decoded.slice(colon + 1);
  }
  gotUser ??= url.searchParams.get('user') ?? 'default';
  gotKey ??= url.searchParams.get('password') ?? '';
  if (gotUser !== user || gotKey !== password) {
    throw new ClickHouseHttpError(
      516,
      'AUTHENTICATION_FAILED',
      `${gotUser}: Authentication failed: password is incorrect, or there is no user with such name.`,
    );
  }
}

async function readRequest(req: IncomingMessage, url: URL): Promise<ParsedRequest> {
  let body = await readBody(req);
  let query = url.searchParams.get('query') ?? '';
  const params: Record<string, string> = {};
  const settings: [string, string][] = [];
  const fields = new Map<string, string>([...url.searchParams]);
  const boundary = /^multipart\/form-data;.*boundary=("?)([^";]+)\1/i.exec(header(req, 'content-type') ?? '')?.[2];
  if (boundary) {
    // use_multipart_params: the query and the param_* values come as form fields.
    for (const [name, value] of parseMultipart(body, boundary)) fields.set(name, value);
    query = fields.get('query') ?? '';
    body = Buffer.alloc(0);
  } else if (!query) {
    query = body.toString('utf8');
    body = Buffer.alloc(0);
  }
  if (!query.trim()) throw new ClickHouseHttpError(62, 'SYNTAX_ERROR', 'Empty query.');
  for (const [name, value] of fields) {
    if (name.startsWith('param_')) {
      if (!IDENT_RE.test(name.slice(6))) throw new ClickHouseHttpError(62, 'SYNTAX_ERROR', `Bad query parameter name '${name}'.`);
      params[name.slice(6)] = value;
    }
    else if (!PROTOCOL_PARAMS.has(name)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new ClickHouseHttpError(115, 'UNKNOWN_SETTING', `Unknown setting '${name}'.`);
      settings.push([name, value]);
    }
  }
  const explicitFormat = /^\s*INSERT\b/i.test(query) ? undefined : /\bFORMAT\s+(\w+)\s*;?\s*$/i.exec(query)?.[1];
  return {
    query,
    body,
    database: url.searchParams.get('database') || 'default',
    format: explicitFormat ?? (url.searchParams.get('default_format') || 'TabSeparated'),
    settings,
    params,
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const encoding = header(req, 'content-encoding')?.toLowerCase();
  const decoder = encoding === 'gzip' ? zlib.createGunzip()
    : encoding === 'deflate' ? zlib.createInflate()
    : encoding === 'br' ? zlib.createBrotliDecompress()
    : undefined;
  if (encoding && !decoder) {
    throw new ClickHouseHttpError(1, 'UNSUPPORTED_METHOD', `Unknown Content-Encoding: ${encoding}`);
  }
  const chunks: Buffer[] = [];
  const collect = async (source: AsyncIterable<Buffer>) => { for await (const c of source) chunks.push(c); };
  if (decoder) await pipeline(req, decoder, collect);
  else await collect(req);
  return Buffer.concat(chunks);
}

function parseMultipart(body: Buffer, boundary: string): [string, string][] {
  const out: [string, string][] = [];
  for (const part of body.toString('utf8').split(`--${boundary}`)) {
    const split = part.indexOf('\r\n\r\n');
    const name = /name="([^"]+)"/.exec(part.slice(0, split))?.[1];
    if (split < 0 || !name) continue;
    out.push([name, part.slice(split + 4).replace(/\r\n$/, '')]);
  }
  return out;
}

function placeholderTypes(query: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const m of query.matchAll(/\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([^{}]+?)\s*\}/g)) types.set(m[1]!, m[2]!);
  return types;
}

function toClickHouseError(err: unknown): { code: number; type: string; message: string } {
  if (err instanceof ClickHouseHttpError) return { code: err.code, type: err.type, message: err.message };
  const e = err as { clickhouseCode?: number; message?: string };
  const text = String(e?.message ?? err);
  // chdb's message is already "Code: N. DB::Exception: <message> (TYPE)"; keep only <message>.
  const m = /^Code: (\d+)\. DB::Exception: ([\s\S]*?)\s*\(([A-Z][A-Z0-9_]+)\)\s*$/.exec(text.trim());
  if (m) return { code: Number(m[1]), message: m[2]!, type: m[3]! };
  return { code: e?.clickhouseCode ?? 1001, type: 'STD_EXCEPTION', message: text };
}

function pickEncoding(req: IncomingMessage): 'gzip' | 'deflate' | 'br' | undefined {
  const accept = header(req, 'accept-encoding') ?? '';
  return (['gzip', 'deflate', 'br'] as const).find((enc) => accept.includes(enc));
}

function compressWith(encoding: 'gzip' | 'deflate' | 'br', body: Buffer): Buffer {
  if (encoding === 'gzip') return zlib.gzipSync(body);
  if (encoding === 'deflate') return zlib.deflateSync(body);
  return zlib.brotliCompressSync(body);
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function quoteIdent(name: string): string {
  return `\`${name.replaceAll('\\', '\\\\').replaceAll('`', '\\`')}\``;
}

/** A string literal of exactly `value`: backslash, quote and control characters escaped. */
export function quoteString(value: string): string {
  return `'${value.replace(/[\\'\x00-\x1f\x7f]/g, (c) => (c === '\\' || c === "'" ? `\\${c}` : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`))}'`;
}
