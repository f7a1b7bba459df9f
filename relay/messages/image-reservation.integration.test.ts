// An image costs at most its model's bound (Anthropic scales an image down to the model's largest size and
// bills about width × height / 750 tokens: ~1,600 on the models up to 4.6, 5,000 on Opus 4.7; the API
// takes no image above 8,000 × 8,000 px), not the model's whole context window. Before, one screenshot
// to Claude Opus 4.7 reserved its 1,000,000-token window (2,500,200 quota at max_tokens 16): an account
// with $1 of balance was refused a request that costs a cent. The image's base64 data is not text and is
// left out of the byte bound; what the provider states is billed exactly, up to that bound.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  accountQuota, billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, storeOptions, type GatewayStack, startGatewayStack,
} from '../../tests/harness/gateway-stack.js';
import { normalMessage, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';
import { relayMetrics } from '../metrics/relay-metrics.js';
import { jpegWithDecoyFrame, pngOfSize } from '../../tests/harness/image-headers.js';

/** $5 / $25 per million tokens: model ratio 2.5, completion ratio 5 (built-in). */
const OPUS_47 = 'claude-opus-4-7';
/** A later Claude model whose largest image size is not published: bounded by an 8,000 × 8,000 px image. */
const OPUS_5 = 'claude-opus-5';
/** A Claude model up to 4.6: an image scaled to 1,568 px and 1,600 tokens at most. */
const SONNET_45 = 'claude-sonnet-4-5';
/** A model of no known image bound (ratio 1, window 200,000 as any unknown model's). */
const UNKNOWN = 'acme-vision-1';
/** 5,000 tokens (3.75 MP / 750) and a tenth more. */
const OPUS_47_IMAGE_BOUND = 5_500;
/** 85,334 tokens (8,000 × 8,000 px / 750) and a tenth more. */
const LARGEST_IMAGE_BOUND = 93_868;
/** 300 KB of base64, as a screenshot is (the provider is not asked to decode it). */
const SCREENSHOT = Buffer.alloc(225_000, 7).toString('base64');
/** $1 of balance. */
const FUNDS = 500_000;

let stack: GatewayStack;
let provider: ScriptedProvider;
/** The input tokens the provider states for the next request. */
let statedInput = 0;

beforeAll(async () => {
  stack = await startGatewayStack();
  provider = await startScriptedProvider((r, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(normalMessage(r.model, { input_tokens: statedInput, output_tokens: 3 }, 'a chart'));
  });
  await mockChannel(stack, [OPUS_47, OPUS_5, SONNET_45, UNKNOWN], 'default', { base_url: provider.url });
});
afterAll(async () => {
  await provider?.close();
  await stack?.close();
});

function imageMessage(model: string): Anthropic.MessageCreateParamsNonStreaming {
  return {
    model, max_tokens: 16,
    messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: SCREENSHOT } },
      { type: 'text', text: 'What does this screenshot show?' },
    ] }],
  };
}

async function client(funds = FUNDS): Promise<{ anthropic: Anthropic; openai: OpenAI; userId: number }> {
  const account = await fundedAccount(stack, funds);
  const key = await createApiKey(stack, account);
  return {
    anthropic: new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 }),
    openai: new OpenAI({ apiKey: key.key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 }),
    userId: account.id,
  };
}

/** The ledger's and ClickHouse's quota of a request, and the balance after it. */
async function books(requestId: string, userId: number): Promise<{ prompt: number; quota: number; logQuota: number; balance: number }> {
  const row = await ledgerRow(stack, requestId);
  await billingSettled(stack);
  const rs = await stack.ch.query({ query: 'SELECT quota FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId }, format: 'JSONEachRow' });
  const logs = await rs.json<{ quota: number | string }>();
  expect(logs).toHaveLength(1);
  return { prompt: Number(row.prompt_tokens), quota: Number(row.quota), logQuota: Number(logs[0]!.quota), balance: await accountQuota(stack, userId) };
}

describe('an image reserves its model\'s image bound, not the context window', () => {
  it('serves a screenshot to Claude Opus 4.7 from $1 of balance and bills the stated usage exactly', async () => {
    const { anthropic, userId } = await client();
    statedInput = 4_790;
    const { data, response } = await anthropic.messages.create(imageMessage(OPUS_47)).withResponse();
    expect(data.usage.input_tokens).toBe(4_790);
    const billed = await books(response.headers.get('x-gateway-request-id')!, userId);
    expect(billed.prompt).toBe(4_790);
    expect(billed.quota).toBe(Math.round((4_790 + 3 * 5) * 2.5));
    expect(billed.logQuota).toBe(billed.quota);
    expect(FUNDS - billed.balance).toBe(billed.quota);
  }, 60_000);

  it('a usage above the image bound (a model that reads larger images) is billed in full up to the window, and flagged over its reservation', async () => {
    const { anthropic, userId } = await client();
    // The reservation: the text bytes less the image data, plus the image's bound, at ratio 2.5.
    const params = imageMessage(OPUS_47);
    const textBytes = Buffer.byteLength(JSON.stringify(params)) - SCREENSHOT.length;
    statedInput = textBytes + OPUS_47_IMAGE_BOUND + 10_000;
    const flagged = relayMetrics.overReservations.value;
    const { response } = await anthropic.messages.create(params).withResponse();
    const billed = await books(response.headers.get('x-gateway-request-id')!, userId);
    expect(billed.prompt).toBe(statedInput);
    expect(billed.quota).toBe(Math.round((statedInput + 3 * 5) * 2.5));
    expect(billed.logQuota).toBe(billed.quota);
    expect(FUNDS - billed.balance).toBe(billed.quota);
    expect(relayMetrics.overReservations.value).toBe(flagged + 1);
  }, 60_000);

  it('bounds an image to a later Claude model by the largest image the API takes; past its window, a usage is billed at the window', async () => {
    const { anthropic, userId } = await client(3_000_000);
    statedInput = 2_000_000;
    const { response } = await anthropic.messages.create(imageMessage(OPUS_5)).withResponse();
    const billed = await books(response.headers.get('x-gateway-request-id')!, userId);
    expect(billed.prompt).toBe(1_000_000);
    expect(billed.quota).toBe(Math.round((1_000_000 + 3 * 5) * 2.5));
    expect(3_000_000 - billed.balance).toBe(billed.quota);
  }, 60_000);

  it('reserves an image to a later Claude model at 93,868 tokens: served from a balance below its window\'s cost, refused below the bound\'s', async () => {
    statedInput = 3_000;
    const textBytes = Buffer.byteLength(JSON.stringify(imageMessage(OPUS_5))) - SCREENSHOT.length;
    const reservation = Math.round((textBytes + LARGEST_IMAGE_BOUND + 16 * 5) * 2.5);
    const enough = await client(reservation);
    expect((await enough.anthropic.messages.create(imageMessage(OPUS_5)).withResponse()).response.status).toBe(200);
    const short = await client(reservation - 1);
    const refused = await short.anthropic.messages.create(imageMessage(OPUS_5)).catch((e: unknown) => e);
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(402);
    await billingSettled(stack);
  }, 60_000);

  it('an image_url data URL from an OpenAI client is bounded alike', async () => {
    const { openai, userId } = await client();
    statedInput = 1_500;
    const { data, response } = await openai.chat.completions.create({
      model: OPUS_47, max_tokens: 16,
      messages: [{ role: 'user', content: [
        { type: 'image_url', image_url: { url: `data:image/png;base64,${SCREENSHOT}` } },
        { type: 'text', text: 'What does this screenshot show?' },
      ] }],
    }).withResponse();
    expect(data.usage?.prompt_tokens).toBe(1_500);
    const billed = await books(response.headers.get('x-gateway-request-id')!, userId);
    expect(billed.quota).toBe(Math.round((1_500 + 3 * 5) * 2.5));
    expect(FUNDS - billed.balance).toBe(billed.quota);
  }, 60_000);

  it('a model of no known bound still reserves its window (402 for $0.30), until ModelImageTokens gives one', async () => {
    // Its window, 200,000 tokens at ratio 1, is more than this balance.
    const funds = 150_000;
    const { anthropic, userId } = await client(funds);
    statedInput = 1_000;
    const refused = await anthropic.messages.create(imageMessage(UNKNOWN)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.APIError);
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(402);
    // The refusal says why a balance that covers the request's likely cost falls short.
    expect((refused as InstanceType<typeof Anthropic.APIError>).message).toContain('reserved at the model\'s context window (200000 tokens)');
    expect(await accountQuota(stack, userId)).toBe(funds);

    await storeOptions(stack, { ModelImageTokens: JSON.stringify({ [UNKNOWN]: 2_000 }) });
    try {
      const { response } = await anthropic.messages.create(imageMessage(UNKNOWN)).withResponse();
      const billed = await books(response.headers.get('x-gateway-request-id')!, userId);
      expect(billed.quota).toBe(1_000 + 3 * 5);
      expect(funds - billed.balance).toBe(billed.quota);
    } finally {
      await storeOptions(stack, { ModelImageTokens: null });
    }
  }, 60_000);
});

describe('a prompt whose provider states no input: each image is billed the most its model bills one', () => {
  // Before, every image was counted at 1,600 tokens whatever its model: a 2,000 × 1,500 screenshot to
  // Claude Opus 4.7 (3,888 patches as Anthropic bills it, up to 4,784) was billed 1,600. Its size is
  // not read for money: a crafted header reads far smaller than the provider decodes.
  const question = { type: 'text' as const, text: 'What does this screenshot show?' };
  const withImage = (model: string, image: Buffer, mediaType: 'image/png' | 'image/jpeg' = 'image/png'): Anthropic.MessageCreateParamsNonStreaming => ({
    model, max_tokens: 16,
    messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: mediaType, data: image.toString('base64') } }, question] }],
  });
  const textOnly = (model: string): Anthropic.MessageCreateParamsNonStreaming => ({ model, max_tokens: 16, messages: [{ role: 'user', content: [question] }] });

  it('bills each model\'s most an image, whatever its size or header, and the ledger, the logs and the balance agree', async () => {
    const { anthropic, userId } = await client();
    statedInput = 0;
    let spent = 0;
    const billedPrompt = async (params: Anthropic.MessageCreateParamsNonStreaming, ratio: number): Promise<number> => {
      const { response } = await anthropic.messages.create(params).withResponse();
      const billed = await books(response.headers.get('x-gateway-request-id')!, userId);
      // A completion ratio of 5 for each (built-in for Claude; the default for a model of no price).
      expect(billed.quota).toBe(Math.round((billed.prompt + 3 * 5) * ratio));
      expect(billed.logQuota).toBe(billed.quota);
      spent += billed.quota;
      expect(FUNDS - billed.balance).toBe(spent);
      return billed.prompt;
    };
    const opusText = await billedPrompt(textOnly(OPUS_47), 2.5);
    expect(await billedPrompt(withImage(OPUS_47, pngOfSize(2000, 1500)), 2.5)).toBe(opusText + 4_784);
    expect(await billedPrompt(withImage(OPUS_47, pngOfSize(320, 240)), 2.5)).toBe(opusText + 4_784);
    // A 4,000 × 3,000 JPEG whose header leads image-size to a 16 × 16 decoy.
    expect(await billedPrompt(withImage(OPUS_47, jpegWithDecoyFrame(4000, 3000, 16, 16), 'image/jpeg'), 2.5)).toBe(opusText + 4_784);
    const sonnetText = await billedPrompt(textOnly(SONNET_45), 1.5);
    expect(await billedPrompt(withImage(SONNET_45, pngOfSize(2000, 1500)), 1.5)).toBe(sonnetText + 1_568);
    // A model whose sizing is not known: 1,600, as before.
    const unknownText = await billedPrompt(textOnly(UNKNOWN), 1);
    expect(await billedPrompt(withImage(UNKNOWN, pngOfSize(320, 240)), 1)).toBe(unknownText + 1_600);
  }, 60_000);
});
