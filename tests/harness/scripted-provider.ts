// A provider scripted per request in a test: a node:http server whose handler gets the request's parsed
// JSON body (the model names the script), and the pieces of the answers the relay tests write most:
// Anthropic's SSE events and a "normal answer" (message_start with 1000 input tokens, 50 deltas
// "tok ", message_delta with 50 output tokens, message_stop), OpenAI's chunks. It records each
// request's headers and when each answer's connection closed, so that tests can say the relay sent
// what it should and let the provider go when it should.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { ledgerRow, type GatewayStack, type LedgerRow } from './gateway-stack.js';

export interface ScriptedRequest {
  model: string;
  body: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  /** The body's bytes as text, as the relay sent them. */
  raw: string;
  /** performance.now() when the request arrived, and when its connection closed (0 while open). */
  at: number;
  closedAt: number;
}

export interface ScriptedProvider {
  url: string;
  /** The last request for each model. */
  seen: Map<string, ScriptedRequest>;
  close(): Promise<void>;
}

export type Script = (req: ScriptedRequest, res: ServerResponse) => void;

export async function startScriptedProvider(script: Script): Promise<ScriptedProvider> {
  const seen = new Map<string, ScriptedRequest>();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const body = JSON.parse(raw) as Record<string, unknown>;
      const r: ScriptedRequest = { model: String(body.model), body, raw, headers: req.headers, at: performance.now(), closedAt: 0 };
      seen.set(r.model, r);
      res.on('close', () => { r.closedAt = performance.now(); });
      script(r, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A provider that answers every request but holds the end of each until `release()`. */
export interface HoldingProvider extends ScriptedProvider {
  /** Requests held now. */
  readonly held: number;
  /** Lets every held answer end (a stream its remaining tokens, a message all of it), in arrival order. */
  release(): void;
}

/**
 * A provider for a fault injected while requests are in flight: a stream writes its first 10 tokens at
 * once (under way when the fault comes) and waits; a message waits whole. Both end at `release()`, as
 * a normal answer of `model` (NORMAL_INPUT in, NORMAL_OUTPUT out).
 */
export async function startHoldingProvider(model: string): Promise<HoldingProvider> {
  const waiting: (() => void)[] = [];
  const provider = await startScriptedProvider(({ body }, res) => {
    if (body.stream === true) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(messageStart(model) + BLOCK_START + TOK.repeat(10));
      waiting.push(() => res.end(TOK.repeat(NORMAL_OUTPUT - 10) + BLOCK_STOP + messageDelta() + MESSAGE_STOP));
    } else {
      waiting.push(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(normalMessage(model));
      });
    }
  });
  return {
    ...provider,
    get held() {
      return waiting.length;
    },
    release() {
      for (const end of waiting.splice(0)) end();
    },
  };
}

export function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export const NORMAL_INPUT = 1000;
export const NORMAL_OUTPUT = 50;

export function messageStart(model: string, usage: Record<string, unknown> = { input_tokens: NORMAL_INPUT, output_tokens: 1 }): string {
  return sse('message_start', { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage } });
}

export const BLOCK_START = sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
export const TOK = sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } });
export const BLOCK_STOP = sse('content_block_stop', { type: 'content_block_stop', index: 0 });
export const MESSAGE_STOP = sse('message_stop', { type: 'message_stop' });
export const PING = 'event: ping\ndata: {"type": "ping"}\n\n';

export function messageDelta(usage: Record<string, unknown> = { output_tokens: NORMAL_OUTPUT }): string {
  return sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage });
}

/** The normal answer: 1000 input tokens, 50 deltas "tok ", 50 output tokens, message_stop. */
export function normalStream(model: string): string {
  return messageStart(model) + BLOCK_START + TOK.repeat(NORMAL_OUTPUT) + BLOCK_STOP + messageDelta() + MESSAGE_STOP;
}

/** The normal answer's text; a JSON answer's without the last space (the relay's count of it is then 50). */
export const NORMAL_TEXT = 'tok '.repeat(NORMAL_OUTPUT - 1) + 'tok';

/** An Anthropic JSON answer of `text` stating `usage`. */
export function normalMessage(model: string, usage: Record<string, unknown> = { input_tokens: NORMAL_INPUT, output_tokens: NORMAL_OUTPUT }, text = NORMAL_TEXT): string {
  return JSON.stringify({ id: 'msg_1', type: 'message', role: 'assistant', model, content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null, usage });
}

export function chatChunk(c: Record<string, unknown>): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', ...c })}\n\n`;
}

export const CHAT_TOK = chatChunk({ choices: [{ index: 0, delta: { content: 'tok ' }, finish_reason: null }] });
export const CHAT_FINISH = chatChunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
export const CHAT_DONE = 'data: [DONE]\n\n';

export function chatCompletion(usage: Record<string, unknown> | null): string {
  return JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: NORMAL_TEXT }, finish_reason: 'stop' }], usage });
}

/** Models no ratio names: model ratio 1, completion ratio 5, group ratio 1. */
export const unnamedCost = (input: number, output: number): number => input + output * 5;

/**
 * A prompt whose bytes bound the 1000 input tokens the scripted answers state: the relay bills no more
 * input than a text request's bytes can hold (docs/billing.md, "Reserve").
 */
export const LONG_PROMPT = 'Please say tok fifty times, separated by spaces. '.repeat(24);

/**
 * The request's bill, the same in every book: its ledger row, its ClickHouse log row and the account's
 * debit in Postgres (`before` minus the row's quota).
 */
export async function billOf(stack: GatewayStack, accountId: number, requestId: string, before: number): Promise<LedgerRow> {
  expect(requestId).toBeTruthy();
  const row = await ledgerRow(stack, requestId);
  const rs = await stack.ch.query({ query: 'SELECT quota FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId }, format: 'JSONEachRow' });
  const logs = await rs.json<{ quota: string | number }>();
  expect(logs.map((l) => Number(l.quota))).toEqual([row.quota]);
  expect(await balanceOf(stack, accountId)).toBe(before - row.quota);
  return row;
}

export async function balanceOf(stack: GatewayStack, accountId: number): Promise<number> {
  const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${accountId}`;
  return Number(u!.quota);
}
