// A channel's model_mapping sends the provider another model than the one asked (an operator mapping an
// old name to its successor, as new-api users do). The prompt the provider reads is bounded by the
// window of the model it is sent, not of the one asked: before, the relay bounded the reservation and
// the billed usage by the asked model's window (200,000 here), so a 600,000-token prompt the provider
// read and charged on a 1,000,000-token model was billed 200,000 tokens (25,001 quota of 75,001).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack,
} from '../../tests/harness/gateway-stack.js';
import { normalMessage, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

/** Window 200,000; model ratio 0.125, completion ratio 5. */
const ASKED = 'claude-3-haiku-20240307';
/** Window 1,000,000. */
const SENT = 'claude-sonnet-4-6';
const PROMPT_TOKENS = 600_000;

let stack: GatewayStack;
let provider: ScriptedProvider;

beforeAll(async () => {
  stack = await startGatewayStack();
  provider = await startScriptedProvider((r, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(normalMessage(r.model, { input_tokens: PROMPT_TOKENS, output_tokens: 1 }, 'ok'));
  });
  await mockChannel(stack, [ASKED], 'default', { base_url: provider.url, model_mapping: JSON.stringify({ [ASKED]: SENT }) });
});
afterAll(async () => {
  await provider?.close();
  await stack?.close();
});

async function billedFor(content: unknown): Promise<{ prompt: number; quota: number; balance: number; funds: number }> {
  const funds = 10_000_000;
  const account = await fundedAccount(stack, funds);
  const key = await createApiKey(stack, account);
  const res = await fetch(`${stack.relayUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key.key, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: ASKED, max_tokens: 16, messages: [{ role: 'user', content }] }),
  });
  expect(res.status, await res.text()).toBe(200);
  expect(provider.seen.get(SENT)).toBeDefined();
  const row = await ledgerRow(stack, res.headers.get('x-gateway-request-id')!);
  await billingSettled(stack);
  const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
  return { prompt: Number(row.prompt_tokens), quota: Number(row.quota), balance: Number(u!.quota), funds };
}

describe('a mapped model\'s window bounds the prompt, not the asked model\'s', () => {
  it('bills a 600,000-token text prompt in full, and the balance by exactly that', async () => {
    const text = 'lorem ipsum dolor sit amet '.repeat(Math.ceil(1_800_000 / 27));
    const billed = await billedFor(text);
    expect(billed.prompt).toBe(PROMPT_TOKENS);
    expect(billed.quota).toBe(Math.round((PROMPT_TOKENS + 1 * 5) * 0.125));
    expect(billed.funds - billed.balance).toBe(billed.quota);
  }, 60_000);

  it('bills a document by URL read as 600,000 tokens in full (media are bounded by the sent model\'s window)', async () => {
    const billed = await billedFor([
      { type: 'document', source: { type: 'url', url: 'https://example.com/report.pdf' } },
      { type: 'text', text: 'summarise' },
    ]);
    expect(billed.prompt).toBe(PROMPT_TOKENS);
    expect(billed.quota).toBe(Math.round((PROMPT_TOKENS + 1 * 5) * 0.125));
    expect(billed.funds - billed.balance).toBe(billed.quota);
  }, 60_000);
});
