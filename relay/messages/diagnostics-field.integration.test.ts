// `diagnostics` (Claude Code sends it on nearly every turn) is left out of what is forwarded: its
// previous_message_id made Anthropic compare the request with a message of the operator's
// organization, maybe another account's, and say how their prompts differ; without its beta
// Anthropic refuses the field ("Extra inputs are not permitted"). Before: forwarded as it was.
// It is cut from the body's bytes, the rest sent byte for byte: written again through JSON, an
// integer above 2^53 in a tool's input reached the provider changed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { normalMessage, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

const MODEL = 'diag-model';
let stack: GatewayStack;
let provider: ScriptedProvider;
let key: string;

const ALIAS = 'diag-alias';

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(normalMessage(model));
  });
  stack = await startGatewayStack();
  await mockChannel(stack, [MODEL], 'default', { base_url: provider.url });
  await mockChannel(stack, [ALIAS], 'default', { base_url: provider.url, model_mapping: JSON.stringify({ [ALIAS]: MODEL }) });
  key = (await createApiKey(stack, await fundedAccount(stack, 10_000_000))).key;
});
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

async function post(body: string): Promise<number> {
  const r = await fetch(`${stack.relayUrl}/v1/messages`, {
    method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body,
  });
  await r.text();
  return r.status;
}

describe('a request with diagnostics', () => {
  it('is served, sent without them, whatever they hold', async () => {
    for (const diagnostics of [{ previous_message_id: 'msg_another_account' }, { previous_message_id: null }, { client: 'claude-code' }]) {
      expect(await post(JSON.stringify({ model: MODEL, max_tokens: 10, diagnostics, messages: [{ role: 'user', content: 'hi' }] }))).toBe(200);
      expect(provider.seen.get(MODEL)!.body).not.toHaveProperty('diagnostics');
    }
  });

  it('has the rest of its body sent byte for byte (an integer above 2^53 and 1.10 unchanged)', async () => {
    const body = `{"model":"${MODEL}","max_tokens":10,"diagnostics":{"previous_message_id":"msg_1"},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"id":9007199254740993,"x":1.10}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`;
    expect(await post(body)).toBe(200);
    expect(provider.seen.get(MODEL)!.raw).toBe(body.replace(',"diagnostics":{"previous_message_id":"msg_1"}', ''));
  });
});

// Review messages: a channel's model_mapping, or a web_search tool given its max_uses, wrote the whole
// body again: 12345678901234567890 in a tool input reached the provider as 12345678901234567000.
describe('a body the relay edits (its model mapped, a web_search tool bounded, diagnostics cut)', () => {
  it('has only the members it edits written again, the rest sent byte for byte', async () => {
    const history = '"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"order_id":12345678901234567890,"price":1.10}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]';
    const search = '{"type":"web_search_20250305","name":"web_search"}';
    const body = `{"model":"${ALIAS}", "max_tokens":10,${history},"diagnostics":{"previous_message_id":"msg_1"},"tools":[{"name":"f","input_schema":{"type":"object"}},${search}]}`;
    expect(await post(body)).toBe(200);
    const bounded = '{"type":"web_search_20250305","name":"web_search","max_uses":20}';
    expect(provider.seen.get(MODEL)!.raw).toBe(`{"model":"${MODEL}", "max_tokens":10,${history},"tools":[{"name":"f","input_schema":{"type":"object"}},${bounded}]}`);
  });
});
