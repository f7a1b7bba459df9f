// A fake OpenAI-format provider that speaks the real Chat Completions wire format, for tests and
// benchmarks of OpenAI-format channels (channel type 1). Built on uWebSockets.js, like the Anthropic
// mock (bench/mock-upstream/), whose request bookkeeping (exchange.ts) and paced SSE writer
// (stream-writer.ts) it shares.
//
// Endpoints: POST /v1/chat/completions (JSON, or `stream: true` SSE chunks ending in `data: [DONE]`),
// GET /v1/models, GET /v1/models/:id. Everything else answers 404. Every answer carries x-request-id
// (`req_` + 32 hex digits) and openai-processing-ms, as OpenAI's do; errors are OpenAI's error JSON
// (`{"error": {"message", "type", "param", "code"}}`) with OpenAI's types and codes.
//
// Determinism (so a test can compute the bill):
//   prompt_tokens      = Σ ceil(utf8Bytes/4) over every message's text (string content or text
//                        parts; tool messages and assistant text included), plus imageInputTokens per
//                        image_url part (option, default 0)
//   cached_tokens      = min(cachedTokens option, prompt_tokens), inside prompt_tokens as OpenAI counts
//   completion_tokens  = min(max_completion_tokens ?? max_tokens, target) where target = the
//                        x-mock-output-tokens header, else the outputTokens option (default 64); each
//                        token is the text "tok "; finish_reason `length` when capped, else `stop`
//   tool calls         = tool_choice `required` (the first tool), a named function or `allowed_tools`
//                        in mode required (the first it names), while the last
//                        message is not a tool result: one tool call, arguments "tok" per string
//                        property and 1 per number, finish_reason `tool_calls`
//   streams            = a first chunk with the role, one chunk per token, a chunk with the
//                        finish_reason, with stream_options.include_usage a last chunk (`choices: []`)
//                        with the usage (every chunk then carries `"usage": null`), `data: [DONE]`
//   service_tier       = "flex" when the request asks for flex, else "default" (OpenAI says the tier that
//                        served the answer, in the body and in every chunk); the serviceTier option
//                        or the x-mock-service-tier header names another (a provider that ignored
//                        the request's tier)
//   n                  = n choices (indexes 0..n-1), each the same answer; completion_tokens is the
//                        sum over them (n × output) as OpenAI bills it, the prompt counted once;
//                        streamed, each token's chunk is repeated once per choice index
//
// Like OpenAI, a reasoning model (o1, o3, o4-mini, gpt-5…) refuses `max_tokens` with a 400 (it wants
// `max_completion_tokens`).
//
// Knobs: model names containing -error<status> (or the x-mock-error header) answer that error;
// tokenDelayMs / firstTokenDelayMs pace streams; failMidStreamAfterTokens closes the socket after N
// tokens; streamErrorAfterTokens sends `data: {"error": …}` after N tokens; errorRate answers 503.
import uWS from 'uWebSockets.js';
import type { HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { randomBytes } from 'node:crypto';
import { exchanges, listenMock, readBody, readHeaders, type Exchange } from '../mock-upstream/exchange.js';
import { forcedErrorStatus, headerInt } from '../mock-upstream/knobs.js';
import type { MockUpstream, MockUpstreamStats, RecordedRequest } from '../mock-upstream/mock-upstream.js';
import { writeStream } from '../mock-upstream/stream-writer.js';
import { randomId, statusLine, toolInput, TOKEN_TEXT } from '../mock-upstream/wire-format.js';

export interface MockOpenAIOptions {
  host?: string;
  port?: number;
  /** When set, requests must carry it as Authorization: Bearer, else 401 invalid_api_key. */
  apiKey?: string;
  /** Output tokens per response unless max_(completion_)tokens is lower. Default 64. */
  outputTokens?: number;
  tokenDelayMs?: number;
  firstTokenDelayMs?: number;
  /** 0..1: fraction of requests answered 503. Default 0. */
  errorRate?: number;
  failMidStreamAfterTokens?: number;
  streamErrorAfterTokens?: number;
  /** Prompt tokens each image_url part adds. Default 0. */
  imageInputTokens?: number;
  /** usage.prompt_tokens_details.cached_tokens (at most the prompt). Default 0. */
  cachedTokens?: number;
  /** The service_tier every answer states, whatever was asked (a provider that ignores the field). Default: as asked (see the header). */
  serviceTier?: string;
  maxBodyBytes?: number;
  recordLimit?: number;
}

export const OPENAI_MODELS: readonly string[] = ['gpt-4o-mini', 'gpt-4o', 'gpt-4.1'];

function tokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4);
}

/** The mock's prompt_tokens of a Chat Completions body (see the header). */
export function countPromptTokens(body: unknown, perImage = 0): number {
  const messages = (body as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(messages)) return 0;
  let n = 0;
  for (const m of messages as Array<{ content?: unknown } | null>) {
    const c = m?.content;
    if (typeof c === 'string') n += tokens(c);
    else if (Array.isArray(c)) {
      for (const p of c as Array<{ type?: unknown; text?: unknown } | null>) {
        if (p?.type === 'text' && typeof p.text === 'string') n += tokens(p.text);
        else if (p?.type === 'image_url') n += perImage;
      }
    }
  }
  return n;
}

/** OpenAI's error type, code and wording for a status. */
export function openaiErrorFor(status: number, model = ''): { type: string; code: string | null; message: string } {
  switch (status) {
    case 400: return { type: 'invalid_request_error', code: null, message: 'Invalid request.' };
    case 401: return { type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.' };
    case 403: return { type: 'invalid_request_error', code: 'unsupported_country_region_territory', message: 'Country, region, or territory not supported' };
    case 404: return { type: 'invalid_request_error', code: 'model_not_found', message: `The model \`${model}\` does not exist or you do not have access to it.` };
    // OpenAI names the account's organization in it.
    case 429: return { type: 'requests', code: 'rate_limit_exceeded', message: `Rate limit reached for ${model || 'the model'} in organization org-mock0123456789 on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.` };
    case 503: return { type: 'server_error', code: null, message: 'The engine is currently overloaded, please try again later' };
    default: return status >= 500
      ? { type: 'server_error', code: null, message: 'The server had an error while processing your request. Sorry about that!' }
      : { type: 'invalid_request_error', code: null, message: 'Invalid request.' };
  }
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

/** null when valid, else [message, param] of a 400, worded as OpenAI's. */
export function validateChatBody(body: unknown): [string, string] | null {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return ['We could not parse the JSON body of your request.', ''];
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '') return ['you must provide a model parameter', 'model'];
  if (!Array.isArray(b.messages)) return ["Missing required parameter: 'messages'.", 'messages'];
  if (b.messages.length === 0) return ["Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", 'messages'];
  for (let i = 0; i < b.messages.length; i++) {
    const m = b.messages[i] as { role?: unknown; content?: unknown; tool_calls?: unknown } | null;
    if (!m || typeof m !== 'object') return [`Invalid type for 'messages[${i}]': expected an object.`, `messages[${i}]`];
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) return [`Invalid value: '${String(m.role)}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.`, `messages[${i}].role`];
    if (m.content === undefined && !(m.role === 'assistant' && m.tool_calls !== undefined)) return [`Missing required parameter: 'messages[${i}].content'.`, `messages[${i}].content`];
  }
  for (const f of ['max_tokens', 'max_completion_tokens'] as const) {
    const v = b[f];
    if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isInteger(v) || v < 1)) return [`Invalid '${f}': integer below minimum value. Expected a value >= 1, but got ${String(v)} instead.`, f];
  }
  // OpenAI's reasoning models refuse max_tokens (their output includes the reasoning).
  if (b.max_tokens !== undefined && b.max_tokens !== null && /^(o\d|gpt-5)/.test(b.model)) {
    return ["Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", 'max_tokens'];
  }
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') return [`Invalid type for 'stream': expected a boolean, but got ${typeof b.stream} instead.`, 'stream'];
  return null;
}

function forcedFunction(body: Record<string, unknown>): { name: string; input: Record<string, unknown> } | null {
  const tools = body.tools as Array<{ function?: { name?: unknown; parameters?: unknown } }> | undefined;
  const choice = body.tool_choice as string | { type?: unknown; function?: { name?: unknown }; allowed_tools?: { mode?: unknown; tools?: Array<{ function?: { name?: unknown } }> } } | undefined;
  if (!Array.isArray(tools) || tools.length === 0) return null;
  const messages = body.messages as Array<{ role?: unknown }>;
  if (messages[messages.length - 1]?.role === 'tool') return null;
  let tool;
  if (choice === 'required') tool = tools[0];
  else if (choice && typeof choice === 'object' && choice.type === 'allowed_tools') {
    // mode required: the first tool allowed is called; auto: the mock answers text.
    const first = choice.allowed_tools?.mode === 'required' ? choice.allowed_tools.tools?.[0]?.function?.name : undefined;
    tool = first === undefined ? undefined : tools.find((t) => t.function?.name === first);
  } else if (choice && typeof choice === 'object') tool = tools.find((t) => t.function?.name === choice.function?.name);
  const name = tool?.function?.name;
  return typeof name === 'string' ? { name, input: toolInput(tool!.function!.parameters) } : null;
}

export type MockOpenAI = Omit<MockUpstream, 'setOptions'> & { setOptions(partial: Partial<MockOpenAIOptions>): void };

export async function startMockOpenAI(opts: MockOpenAIOptions = {}): Promise<MockOpenAI> {
  let options: MockOpenAIOptions = { ...opts };
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

  function begun(res: HttpResponse): Exchange {
    const ex = begin(res);
    // OpenAI's request ids: req_ and 32 hex digits.
    ex.requestId = `req_${randomBytes(16).toString('hex')}`;
    return ex;
  }

  function writeHead(ex: Exchange, status: number, contentType: string, started: number): void {
    ex.res.writeStatus(statusLine(status));
    ex.res.writeHeader('content-type', contentType);
    ex.res.writeHeader('x-request-id', ex.requestId);
    ex.res.writeHeader('openai-processing-ms', String(Date.now() - started));
  }

  function sendJson(ex: Exchange, status: number, body: unknown, started = Date.now(), extra?: Array<[string, string]>): void {
    if (ex.aborted || ex.done) return;
    const json = JSON.stringify(body);
    ex.res.cork(() => {
      writeHead(ex, status, 'application/json', started);
      if (extra) for (const [k, v] of extra) ex.res.writeHeader(k, v);
      ex.res.end(json);
    });
    finish(ex);
  }

  function sendError(ex: Exchange, status: number, override?: { message?: string; param?: string; code?: string | null }, model = ''): void {
    stats.errors++;
    const e = openaiErrorFor(status, model);
    const extra: Array<[string, string]> = status === 429 ? [['retry-after', '1']] : [];
    sendJson(ex, status, { error: { message: override?.message ?? e.message, type: e.type, param: override?.param ?? null, code: override?.code !== undefined ? override.code : e.code } }, Date.now(), extra);
  }

  function authorize(ex: Exchange, headers: Record<string, string>): boolean {
    const key = options.apiKey;
    if (!key) return true;
    const auth = headers['authorization'] ?? '';
    const given = auth.toLowerCase().startsWith('bearer ') ? auth.slice(7).trim() : undefined;
    if (given === key) return true;
    if (given === undefined) {
      sendError(ex, 401, { message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", code: null });
    } else {
      sendError(ex, 401, { message: `Incorrect API key provided: ${given.slice(0, 3)}***${given.slice(-4)}. You can find your API key at https://platform.openai.com/account/api-keys.` });
    }
    return false;
  }

  function completion(ex: Exchange, headers: Record<string, string>, body: Record<string, unknown>, started: number): void {
    const o = options;
    const model = body.model as string;
    const target = headerInt(headers, 'x-mock-output-tokens') ?? o.outputTokens ?? 64;
    const cap = (body.max_completion_tokens ?? body.max_tokens) as number | null | undefined;
    const output = cap ? Math.min(cap, target) : target;
    const prompt = countPromptTokens(body, o.imageInputTokens ?? 0);
    const cached = Math.min(o.cachedTokens ?? 0, prompt);
    const choices = typeof body.n === 'number' && Number.isInteger(body.n) && body.n > 1 ? body.n : 1;
    const tier = headers['x-mock-service-tier'] ?? o.serviceTier ?? (body.service_tier === 'flex' ? 'flex' : 'default');
    const usage = {
      prompt_tokens: prompt,
      completion_tokens: output * choices,
      total_tokens: prompt + output * choices,
      prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    };
    const tool = forcedFunction(body);
    const finishReason = tool ? 'tool_calls' : cap && cap < target ? 'length' : 'stop';
    const id = `chatcmpl-${randomId('', 29)}`;
    const created = Math.floor(Date.now() / 1000);
    const toolCall = tool ? { id: randomId('call_'), type: 'function', function: { name: tool.name, arguments: JSON.stringify(tool.input) } } : null;

    if (body.stream !== true) {
      const message = {
        role: 'assistant', content: toolCall ? null : TOKEN_TEXT.repeat(output), refusal: null, annotations: [],
        ...(toolCall ? { tool_calls: [toolCall] } : {}),
      };
      const answer = {
        id, object: 'chat.completion', created, model,
        choices: Array.from({ length: choices }, (_, index) => ({ index, message, logprobs: null, finish_reason: finishReason })),
        usage, service_tier: tier, system_fingerprint: 'fp_mock',
      };
      const delay = o.tokenDelayMs ?? 0;
      const wait = output > 0 && delay > 0 ? (o.firstTokenDelayMs ?? delay) + delay * (output - 1) : 0;
      if (wait <= 0) return sendJson(ex, 200, answer, started);
      ex.timer = setTimeout(() => { ex.timer = undefined; sendJson(ex, 200, answer, started); }, wait);
      return;
    }

    const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    const usageField = includeUsage ? ',"usage":null' : '';
    const oneChunk = (index: number, delta: unknown, finish: string | null): string =>
      `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},"service_tier":${JSON.stringify(tier)},"system_fingerprint":"fp_mock","choices":[{"index":${index},"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finish === null ? 'null' : `"${finish}"`}}]${usageField}}\n\n`;
    const chunk = (delta: unknown, finish: string | null): string => {
      let out = '';
      for (let i = 0; i < choices; i++) out += oneChunk(i, delta, finish);
      return out;
    };
    let head = chunk({ role: 'assistant', content: toolCall ? null : '', refusal: null }, null);
    if (toolCall) {
      head += chunk({ tool_calls: [{ index: 0, id: toolCall.id, type: 'function', function: { name: toolCall.function.name, arguments: '' } }] }, null);
      head += chunk({ tool_calls: [{ index: 0, function: { arguments: toolCall.function.arguments } }] }, null);
    }
    let tail = chunk({}, finishReason);
    if (includeUsage) {
      tail += `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, service_tier: tier, system_fingerprint: 'fp_mock', choices: [], usage })}\n\n`;
    }
    tail += 'data: [DONE]\n\n';
    stats.streams++;
    writeStream(ex, {
      head,
      tail,
      outputTokens: toolCall ? 0 : output,
      failAfterTokens: headerInt(headers, 'x-mock-fail-after-tokens') ?? o.failMidStreamAfterTokens,
      streamErrorAfterTokens: o.streamErrorAfterTokens,
      tokenDelayMs: o.tokenDelayMs ?? 0,
      firstTokenDelayMs: o.firstTokenDelayMs ?? o.tokenDelayMs ?? 0,
      delta: chunk({ content: TOKEN_TEXT }, null),
      errorEvent: `data: ${JSON.stringify({ error: { message: 'The server had an error while processing your request. Sorry about that!', type: 'server_error', param: null, code: null } })}\n\n`,
    }, {
      counters: stats,
      finish,
      writeResponseHead: () => {
        writeHead(ex, 200, 'text/event-stream; charset=utf-8', started);
        ex.res.writeHeader('cache-control', 'no-cache');
      },
    });
  }

  app.post('/v1/chat/completions', (res, req) => {
    const started = Date.now();
    const ex = begun(res);
    const headers = readHeaders(req);
    const path = req.getUrl();
    readBody(ex, options.maxBodyBytes ?? 32 * 1024 * 1024, (raw) => {
      if (raw === null) {
        record('POST', path, headers, undefined, ex);
        return sendError(ex, 413, { message: 'Request too large.' });
      }
      let body: unknown;
      try {
        body = raw.length === 0 ? undefined : JSON.parse(raw.toString('utf8'));
      } catch {
        body = null;
      }
      record('POST', path, headers, body, ex);
      if (!authorize(ex, headers)) return;
      const forcedByHeader = forcedErrorStatus(headers, undefined);
      if (forcedByHeader !== undefined) return sendError(ex, forcedByHeader);
      if (body === null || body === undefined) return sendError(ex, 400, { message: 'We could not parse the JSON body of your request. (HINT: This likely means you aren\'t using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)' });
      const invalid = validateChatBody(body);
      if (invalid) return sendError(ex, 400, { message: invalid[0], param: invalid[1] || undefined, code: invalid[1] ? null : undefined });
      const b = body as Record<string, unknown>;
      const forced = forcedErrorStatus({}, b.model);
      if (forced !== undefined) return sendError(ex, forced, undefined, b.model as string);
      if (options.errorRate && Math.random() < options.errorRate) return sendError(ex, 503);
      completion(ex, headers, b, started);
    });
  });

  const modelObject = (id: string) => ({ id, object: 'model', created: 1715367049, owned_by: 'system' });
  app.get('/v1/models', (res, req) => {
    const ex = begun(res);
    const headers = readHeaders(req);
    record('GET', '/v1/models', headers, undefined, ex);
    if (!authorize(ex, headers)) return;
    sendJson(ex, 200, { object: 'list', data: OPENAI_MODELS.map(modelObject) });
  });
  app.get('/v1/models/:id', (res, req) => {
    const ex = begun(res);
    const headers = readHeaders(req);
    const id = decodeURIComponent(req.getParameter(0) ?? '');
    record('GET', req.getUrl(), headers, undefined, ex);
    if (!authorize(ex, headers)) return;
    if (!OPENAI_MODELS.includes(id)) return sendError(ex, 404, { message: `The model '${id}' does not exist`, param: 'model' }, id);
    sendJson(ex, 200, modelObject(id));
  });
  app.any('/*', (res, req) => {
    const ex = begun(res);
    record(req.getMethod().toUpperCase(), req.getUrl(), readHeaders(req), undefined, ex);
    sendError(ex, 404, { message: `Invalid URL (${req.getMethod().toUpperCase()} ${req.getUrl()})`, code: null });
  });

  const { listenSocket, port, url } = await listenMock(app, host, opts.port ?? 0, 'mock openai');
  let closed = false;
  return {
    port,
    url,
    requests: recorded,
    stats,
    setOptions(partial: Partial<MockOpenAIOptions>) {
      options = { ...options, ...partial };
    },
    async close() {
      if (closed) return;
      closed = true;
      uWS.us_listen_socket_close(listenSocket);
      for (const ex of [...live]) finish(ex);
      const closeAll = (app as unknown as { close?: () => void }).close;
      if (typeof closeAll === 'function') closeAll.call(app);
    },
  };
}
