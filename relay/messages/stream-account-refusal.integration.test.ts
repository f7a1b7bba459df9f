// A provider's stream that fails with the channel's own account out of credit (Anthropic's
// billing_error event, OpenAI's insufficient_quota), in the four pairings of client and channel
// protocol, read with the official SDKs: the client is told the gateway's account was refused, never
// the words of its own empty balance, and the text delivered before is billed.
//
// Before: passed through as the provider wrote it (same protocol: billing_error / insufficient_quota
// with "Your credit balance is too low", the type and words of the relay's own 402), or, Anthropic
// client on an OpenAI channel, an api_error carrying "You exceeded your current quota".
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { anthropicStreamRead, openaiStreamRead, type StreamRead } from '../../tests/harness/sdk-streams.js';
import { BLOCK_START, chatChunk, LONG_PROMPT, messageStart, sse, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';
import { LOG_TYPE } from '../../core/usage/usage-event.js';
import { PROVIDER_ACCOUNT_REFUSED } from '../errors.js';

const CONTENT = ['Hello', ' there'];
const anthropicDelta = (text: string) => sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
const chatDelta = (content: string) => chatChunk({ choices: [{ index: 0, delta: { content }, finish_reason: null }] });
const ANTHROPIC_REFUSAL = sse('error', { type: 'error', error: { type: 'billing_error', message: 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.' } });
const CHAT_REFUSAL = `data: ${JSON.stringify({ error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } })}\n\n`;

let stack: GatewayStack;
let provider: ScriptedProvider;
let key: string;
let accountId: number;
let anthropic: Anthropic;
let openai: OpenAI;
const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (model.startsWith('oai-')) {
      res.end(chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) + CONTENT.map(chatDelta).join('') + CHAT_REFUSAL);
    } else {
      res.end(messageStart(model) + BLOCK_START + CONTENT.map(anthropicDelta).join('') + ANTHROPIC_REFUSAL);
    }
  });
  stack = await startGatewayStack();
  await mockChannel(stack, ['refused-mid'], 'default', { base_url: provider.url });
  await mockChannel(stack, ['oai-refused-mid'], 'default', { base_url: provider.url, type: 1 });
  const account = await fundedAccount(stack, 100_000_000);
  accountId = account.id;
  key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

const anthropicStream = (model: string): Promise<StreamRead> => anthropicStreamRead(anthropic, { model, max_tokens: 100, messages });

const openaiStream = (model: string): Promise<StreamRead> => openaiStreamRead(openai, { model, max_tokens: 100, messages });

describe('a provider refusing the channel\'s account mid-stream', () => {
  for (const model of ['refused-mid', 'oai-refused-mid']) {
    it(`Anthropic client (${model}): an api_error saying the gateway's account was refused`, async () => {
      const { text, error } = await anthropicStream(model);
      expect(text).toBe(CONTENT.join(''));
      expect(error).toBeInstanceOf(Anthropic.APIError);
      expect((error as InstanceType<typeof Anthropic.APIError>).error).toEqual({ type: 'error', error: { type: 'api_error', message: PROVIDER_ACCOUNT_REFUSED } });
    });

    it(`OpenAI client (${model}): a server_error saying the gateway's account was refused`, async () => {
      const { text, error } = await openaiStream(model);
      expect(text).toBe(CONTENT.join(''));
      expect(error).toBeInstanceOf(OpenAI.APIError);
      const e = error as InstanceType<typeof OpenAI.APIError>;
      expect({ type: e.type, code: e.code, message: e.message }).toEqual({ type: 'server_error', code: null, message: PROVIDER_ACCOUNT_REFUSED });
    });
  }

  it('every stream is settled with what it delivered, and the account debited exactly that', async () => {
    await billingSettled(stack);
    const rows = await stack.sql<{ n: number; quota: string; balance: string }[]>`
      SELECT count(*)::int AS n, coalesce(sum(quota), 0)::text AS quota, (SELECT quota::text FROM users WHERE id = ${accountId}) AS balance
      FROM ledger WHERE user_id = ${accountId} AND type = ${LOG_TYPE.consume}`;
    expect(rows[0]!.n).toBe(4);
    expect(BigInt(rows[0]!.quota)).toBeGreaterThan(0n);
    expect(BigInt(rows[0]!.balance) + BigInt(rows[0]!.quota)).toBe(100_000_000n);
  });
});
