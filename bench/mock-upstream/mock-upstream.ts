// A fake Anthropic provider that speaks the real Messages API wire format, for tests and benchmarks
// (there is no internet). Built on uWebSockets.js so that a benchmark measures the gateway in front
// of it, not the mock. This module is the HTTP server and the entry others import; the wire format
// is in wire-format.ts, the knobs in knobs.ts, the paced SSE writer in stream-writer.ts, the
// per-request bookkeeping on uWS in exchange.ts.
//
// Endpoints: POST /v1/messages (JSON or `stream: true` SSE), POST /v1/messages/count_tokens,
// GET /v1/models, GET /v1/models/:id. Everything else answers 404 not_found_error.
//
// Determinism (so a test can compute the bill):
//   input_tokens  = countInputTokens(body): Σ ceil(utf8Bytes/4) over every text piece in `system`
//                   and messages[].content (string, or blocks of type 'text'). Other blocks count 0.
//   output_tokens = min(max_tokens, target) where target = x-mock-output-tokens header, else the
//                   outputTokens option (default 64). Each output token is the text "tok ".
//   stop_reason   = 'max_tokens' when max_tokens < target, else 'end_turn'.
//   cache_read_input_tokens / cache_creation.ephemeral_5m_input_tokens / ephemeral_1h_input_tokens =
//                   header x-mock-cache-read-tokens / x-mock-cache-creation-tokens /
//                   x-mock-cache-creation-1h-tokens, else the options, else 0 (input_tokens
//                   unchanged); cache_creation_input_tokens is the 5m and 1h writes together.
//   plus, when set, documentInputTokens per `document` block and imageInputTokens per `image` block
//                   (knobs.ts): media that costs far more tokens than its bytes.
//   thinking:       a request with `thinking` (enabled, or adaptive) is answered with a thinking block
//                   of thinkingTokens "tok " tokens and a signature before the text (knobs.ts);
//                   output_tokens counts both, the text's tokens at most max_tokens less the thinking's.
//   tool calls:     a request whose tool_choice forces a tool (`any`, `tool`) and whose last message
//                   holds no tool_result is answered with a tool_use block (stop_reason tool_use),
//                   arguments "tok" per string property and 1 per number (wire-format.ts,
//                   forcedTool), output_tokens as above; streamed in one write.
//
// Knobs (errors, delays, streams cut or failed mid-way): knobs.ts.
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { exchanges, listenMock, readBody, readHeaders, type Exchange } from './exchange.js';
import { forcedErrorStatus, isKeyFailure, KEY_FAILURES, messageKnobs, type KeyFailure, type MockUpstreamOptions } from './knobs.js';
import { writeStream } from './stream-writer.js';
import {
  countInputTokens, currentRateLimitHeaders, mediaInputTokens, errorTypeFor, forcedTool, messageBody, messageUsage, MODELS, randomId, statusLine,
  streamHead, streamTail, TEXT_AFTER_THINKING_DELTA_EVENT, THINKING_DELTA_EVENT, THINKING_END_EVENTS, toolUseMessageBody, toolUseStream, validateMessagesBody,
} from './wire-format.js';

export type { MockUpstreamOptions } from './knobs.js';
export { countInputTokens, errorTypeFor, MOCK_MODEL_IDS, outputText, randomId, TOKEN_TEXT, validateMessagesBody } from './wire-format.js';

export interface RecordedRequest {
  method: string;
  /** Path plus query string, e.g. /v1/models?limit=2 */
  path: string;
  /** Lower-case names. */
  headers: Record<string, string>;
  /** Parsed JSON body; undefined when there was none, null when it was not valid JSON. */
  body: unknown;
  /** request-id the mock answered with. */
  requestId: string;
  receivedAt: number;
}

export interface MockUpstreamStats {
  /** Every request received. */
  requests: number;
  /** SSE responses started. */
  streams: number;
  /** Responses the client went away from before the mock finished them. */
  aborted: number;
  /** Error responses (HTTP status >= 400, and `event: error` mid-stream). */
  errors: number;
  /** Streams the mock killed on purpose (failMidStreamAfterTokens). */
  dropped: number;
  /** Text deltas written to streams. */
  tokensStreamed: number;
}

export interface MockUpstream {
  readonly port: number;
  /** http://host:port, usable as the SDK's baseURL. */
  readonly url: string;
  /** The last `recordLimit` requests, oldest first. */
  readonly requests: RecordedRequest[];
  readonly stats: MockUpstreamStats;
  /** Merge into the current options; applies to requests that arrive afterwards. */
  setOptions(partial: Partial<MockUpstreamOptions>): void;
  /** Stop listening and force-close every connection. */
  close(): Promise<void>;
}

export async function startMockUpstream(opts: MockUpstreamOptions = {}): Promise<MockUpstream> {
  let options: MockUpstreamOptions = { ...opts };
  const host = opts.host ?? '127.0.0.1';
  const recorded: RecordedRequest[] = [];
  const stats: MockUpstreamStats = { requests: 0, streams: 0, aborted: 0, errors: 0, dropped: 0, tokensStreamed: 0 };
  const { live, begin, finish } = exchanges(stats);
  const app: TemplatedApp = uWS.App();

  function record(method: string, path: string, headers: Record<string, string>, body: unknown, ex: Exchange): void {
    recorded.push({ method, path, headers, body, requestId: ex.requestId, receivedAt: Date.now() });
    const limit = options.recordLimit ?? 100;
    if (recorded.length > limit) recorded.splice(0, recorded.length - limit);
  }

  function writeCommonHeaders(ex: Exchange, contentType: string, rateLimited: boolean): void {
    const res = ex.res;
    res.writeHeader('request-id', ex.requestId);
    res.writeHeader('content-type', contentType);
    if (rateLimited) for (const [k, v] of currentRateLimitHeaders()) res.writeHeader(k, v);
  }

  function sendJson(ex: Exchange, status: number, body: unknown, rateLimited = false, extra?: Array<[string, string]>): void {
    if (ex.aborted || ex.done) return;
    const json = JSON.stringify(body);
    ex.res.cork(() => {
      ex.res.writeStatus(statusLine(status));
      writeCommonHeaders(ex, 'application/json', rateLimited);
      if (extra) for (const [k, v] of extra) ex.res.writeHeader(k, v);
      ex.res.end(json);
    });
    finish(ex);
  }

  function sendError(ex: Exchange, status: number, message?: string): void {
    stats.errors++;
    const e = errorTypeFor(status);
    const extra: Array<[string, string]> = [];
    if (status === 429) extra.push(['retry-after', '1']);
    if (status === 529 || status === 500) extra.push(['x-should-retry', 'true']);
    sendJson(ex, status, {
      type: 'error',
      error: { type: e.type, message: message ?? e.message },
      request_id: ex.requestId,
    }, status === 429, extra);
  }

  /** 401 unless the request carries an accepted key; a key told to fail fails. true = authorized. */
  function authorize(ex: Exchange, headers: Record<string, string>): boolean {
    const auth = headers['authorization'];
    const given = headers['x-api-key'] ?? (auth?.toLowerCase().startsWith('bearer ') ? auth.slice(7).trim() : undefined);
    const failure = given !== undefined ? options.keyFailures?.[given] : undefined;
    if (failure !== undefined) {
      const f = KEY_FAILURES[failure];
      sendError(ex, f.status, f.message);
      return false;
    }
    const key = options.apiKey;
    if (!key) return true;
    if (given === key || (given !== undefined && options.apiKeys?.includes(given))) return true;
    sendError(ex, 401, given === undefined ? 'x-api-key header is required' : 'invalid x-api-key');
    return false;
  }

  /** Common start of the two POST endpoints: parse, validate, forced errors. */
  function handlePost(
    res: HttpResponse,
    req: HttpRequest,
    requireMaxTokens: boolean,
    then: (ex: Exchange, headers: Record<string, string>, body: Record<string, unknown>) => void,
  ): void {
    const ex = begin(res);
    const headers = readHeaders(req);
    const path = req.getUrl();
    readBody(ex, options.maxBodyBytes ?? 32 * 1024 * 1024, (raw) => {
      if (raw === null) {
        record('POST', path, headers, undefined, ex);
        sendError(ex, 413);
        return;
      }
      let body: unknown;
      let parseError = false;
      if (raw.length === 0) {
        body = undefined;
      } else {
        try {
          body = JSON.parse(raw.toString('utf8'));
        } catch {
          body = null;
          parseError = true;
        }
      }
      record('POST', path, headers, body, ex);
      if (!authorize(ex, headers)) return;
      const forcedByHeader = forcedErrorStatus(headers, undefined);
      if (forcedByHeader !== undefined) return sendError(ex, forcedByHeader);
      if (parseError) return sendError(ex, 400, 'There was an error parsing the body of your request: invalid JSON');
      if (body === undefined) return sendError(ex, 400, 'Request body is empty: a JSON object is required');
      const invalid = validateMessagesBody(body, { requireMaxTokens });
      if (invalid) return sendError(ex, 400, invalid);
      const b = body as Record<string, unknown>;
      const forced = forcedErrorStatus({}, b.model);
      if (forced !== undefined) return sendError(ex, forced);
      then(ex, headers, b);
    });
  }

  // --- /v1/messages ------------------------------------------------------------------------------

  function handleMessage(ex: Exchange, headers: Record<string, string>, body: Record<string, unknown>): void {
    const o = options;
    if (o.errorRate && Math.random() < o.errorRate) return sendError(ex, 529);

    const model = body.model as string;
    const k = messageKnobs(headers, o, body.max_tokens as number, body.thinking);
    const input = countInputTokens(body) + mediaInputTokens(body, k.documentInputTokens, k.imageInputTokens);
    // Anthropic bills the thinking as output: output_tokens counts its tokens and the text's.
    const output = k.thinkingTokens + k.outputTokens;
    const usage = messageUsage(input, k.cacheReadTokens, k.cacheCreationTokens, output, k.cacheCreation1hTokens, k.webSearchRequests);
    const id = randomId('msg_');

    const tool = forcedTool(body);
    if (tool) {
      const toolUseId = randomId('toolu_');
      if (body.stream !== true) return sendJson(ex, 200, toolUseMessageBody(id, model, usage, tool, toolUseId), true);
      stats.streams++;
      ex.res.cork(() => {
        ex.res.writeStatus('200 OK');
        writeCommonHeaders(ex, 'text/event-stream; charset=utf-8', true);
        ex.res.writeHeader('cache-control', 'no-cache');
        ex.res.end(toolUseStream(id, model, usage, tool, toolUseId));
      });
      finish(ex);
      return;
    }

    if (body.stream !== true) {
      const message = messageBody(id, model, usage, k.stopReason, k.thinkingTokens);
      const n = output;
      const wait = n > 0 ? k.firstTokenDelayMs + k.tokenDelayMs * (n - 1) : 0;
      if (wait <= 0) return sendJson(ex, 200, message, true);
      ex.timer = setTimeout(() => { ex.timer = undefined; sendJson(ex, 200, message, true); }, wait);
      return;
    }

    stats.streams++;
    const thinks = k.thinkingTokens > 0;
    writeStream(ex, {
      head: streamHead(id, model, usage, thinks),
      tail: streamTail(k.stopReason, output, k.webSearchRequests, thinks),
      outputTokens: output,
      ...(thinks ? { thinkingTokens: k.thinkingTokens, thinkingDelta: THINKING_DELTA_EVENT, thinkingEnd: THINKING_END_EVENTS, delta: TEXT_AFTER_THINKING_DELTA_EVENT } : {}),
      failAfterTokens: k.failAfterTokens,
      streamErrorAfterTokens: k.streamErrorAfterTokens,
      tokenDelayMs: k.tokenDelayMs,
      firstTokenDelayMs: k.firstTokenDelayMs,
    }, {
      counters: stats,
      finish,
      writeResponseHead: () => {
        ex.res.writeStatus('200 OK');
        writeCommonHeaders(ex, 'text/event-stream; charset=utf-8', true);
        ex.res.writeHeader('cache-control', 'no-cache');
      },
    });
  }

  app.post('/v1/messages', (res, req) => handlePost(res, req, true, handleMessage));

  app.post('/v1/messages/count_tokens', (res, req) =>
    handlePost(res, req, false, (ex, _headers, body) => {
      sendJson(ex, 200, { input_tokens: countInputTokens(body) });
    }));

  // --- /v1/models ----------------------------------------------------------------------------------

  const modelInfo = (m: (typeof MODELS)[number]) => ({ type: 'model', id: m.id, display_name: m.display_name, created_at: m.created_at });

  app.get('/v1/models', (res, req) => {
    const ex = begin(res);
    const headers = readHeaders(req);
    const query = req.getQuery() ?? '';
    const limitParam = req.getQuery('limit');
    const afterId = req.getQuery('after_id');
    const beforeId = req.getQuery('before_id');
    record('GET', query ? `/v1/models?${query}` : '/v1/models', headers, undefined, ex);
    if (!authorize(ex, headers)) return;
    let limit = 20;
    if (limitParam) {
      const l = Number(limitParam);
      if (!Number.isInteger(l) || l < 1 || l > 1000) return sendError(ex, 400, 'limit: Input should be between 1 and 1000');
      limit = l;
    }
    let list = MODELS.slice();
    if (afterId) list = list.slice(list.findIndex((m) => m.id === afterId) + 1);
    if (beforeId) {
      const i = list.findIndex((m) => m.id === beforeId);
      list = i >= 0 ? list.slice(Math.max(0, i - limit), i) : list;
    }
    const page = list.slice(0, limit);
    sendJson(ex, 200, {
      data: page.map(modelInfo),
      has_more: list.length > page.length,
      first_id: page[0]?.id ?? null,
      last_id: page[page.length - 1]?.id ?? null,
    });
  });

  app.get('/v1/models/:id', (res, req) => {
    const ex = begin(res);
    const headers = readHeaders(req);
    const id = decodeURIComponent(req.getParameter(0) ?? '');
    record('GET', req.getUrl(), headers, undefined, ex);
    if (!authorize(ex, headers)) return;
    const m = MODELS.find((x) => x.id === id);
    if (!m) return sendError(ex, 404, `model: ${id}`);
    sendJson(ex, 200, modelInfo(m));
  });

  // Run-time control of the per-key failures, for a mock in its own process (the bench's).
  app.put('/mock/key-failures', (res, req) => {
    if (!options.control) {
      const ex = begin(res);
      record('PUT', req.getUrl(), readHeaders(req), undefined, ex);
      return sendError(ex, 404, 'Not Found');
    }
    const ex = begin(res);
    readBody(ex, 64 * 1024, (raw) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw?.toString('utf8') ?? '');
      } catch {
        return sendError(ex, 400, 'a JSON object of key to failure (revoked, forbidden, no_credit) or null');
      }
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return sendError(ex, 400, 'a JSON object of key to failure (revoked, forbidden, no_credit) or null');
      const next: Record<string, KeyFailure> = { ...options.keyFailures };
      for (const [k, v] of Object.entries(parsed)) {
        if (v === null) delete next[k];
        else if (isKeyFailure(v)) next[k] = v;
        else return sendError(ex, 400, `${k}: must be revoked, forbidden, no_credit or null`);
      }
      options = { ...options, keyFailures: next };
      sendJson(ex, 200, { key_failures: Object.keys(next).length });
    });
  });

  app.any('/*', (res, req) => {
    const ex = begin(res);
    const method = req.getMethod().toUpperCase();
    record(method, req.getUrl(), readHeaders(req), undefined, ex);
    sendError(ex, 404, 'Not Found');
  });

  // --- listen ----------------------------------------------------------------------------------------

  const { listenSocket, port, url } = await listenMock(app, host, opts.port ?? 0, 'mock upstream');
  let closed = false;

  return {
    port,
    url,
    requests: recorded,
    stats,
    setOptions(partial) {
      options = { ...options, ...partial };
    },
    async close() {
      if (closed) return;
      closed = true;
      uWS.us_listen_socket_close(listenSocket);
      for (const ex of [...live]) finish(ex); // stops timers; not client aborts
      // uWS >= 20.31 App.close(): force-closes every socket, idle keep-alive ones included.
      const closeAll = (app as unknown as { close?: () => void }).close;
      if (typeof closeAll === 'function') closeAll.call(app);
    },
  };
}
