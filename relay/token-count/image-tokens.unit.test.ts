import { describe, expect, it } from 'vitest';
import { imageScaling } from '../../core/pricing/input-bound.js';
import { gifOfSize, jpegOfSize, jpegWithDecoyFrame, pngOfSize, webpOfSize } from '../../tests/harness/image-headers.js';
import { estimatedImageTokens, imagePatchTokens, imagePixels } from './image-tokens.js';
import { IMAGE_TOKENS, MESSAGE_OVERHEAD, promptParts } from './prompt-text.js';

const b64 = (b: Buffer) => b.toString('base64');
const CLAUDE_4_6 = imageScaling('claude-sonnet-4-6')!;
const OPUS_4_7 = imageScaling('claude-opus-4-7')!;

describe('imageScaling: how a model sizes an image', () => {
  it('the Claude models up to 4.6: 1,568 px, 1,568 tokens; Opus 4.7 and later Claude models: 2,576 px, 4,784 tokens; no other model', () => {
    for (const m of [
      'claude-3-5-sonnet-20241022', 'claude-3-haiku-20240307', 'claude-sonnet-4-5', 'claude-haiku-4-5-20251001', 'claude-opus-4-6', 'anthropic/claude-opus-4-1',
      // Bedrock's, Vertex's and OpenRouter's names, new-api's -thinking aliases, Claude Code's [1m].
      'anthropic.claude-3-haiku-20240307-v1:0', 'us.anthropic.claude-sonnet-4-20250514-v1:0', 'claude-opus-4-1@20250805', 'claude-3-5-sonnet-v2@20241022',
      'claude-sonnet-4.5', 'anthropic/claude-3.5-sonnet', 'claude-3.7-sonnet', 'claude-haiku-4.5', 'claude-opus-4-6-thinking', 'claude-sonnet-4-5-thinking',
      'claude-opus-4-1-20250805-thinking', 'claude-sonnet-4-6[1m]', 'us.anthropic.claude-opus-4-6-v1', 'bedrock/us.anthropic.claude-opus-4-6-v1', 'claude-4.5-sonnet',
    ]) {
      expect(imageScaling(m), m).toEqual({ longEdge: 1_568, tokens: 1_568 });
    }
    for (const m of ['claude-opus-4-7', 'claude-opus-4-7-20260101', 'claude-opus-5', 'claude-sonnet-4-8', 'claude-opus-4-7@20260416', 'claude-opus-4.7', 'claude-opus-4-7-thinking', 'claude-opus-4-70']) {
      expect(imageScaling(m), m).toEqual({ longEdge: 2_576, tokens: 4_784 });
    }
    for (const m of ['gpt-4o', 'gpt-4o-mini', 'acme-vision-1', '', 'claude-2.1', 'claude-instant-1.2', 'anthropic.claude-v2:1']) expect(imageScaling(m), m).toBeUndefined();
  });
});

describe('imagePixels: the size a base64 image\'s header gives', () => {
  it('reads PNG, JPEG (past 200 KB of APP segments), GIF and WebP', () => {
    expect(imagePixels(b64(pngOfSize(2000, 1500)))).toEqual({ width: 2000, height: 1500 });
    expect(imagePixels(b64(jpegOfSize(640, 480)))).toEqual({ width: 640, height: 480 });
    expect(imagePixels(b64(jpegOfSize(640, 480, 200_000)))).toEqual({ width: 640, height: 480 });
    expect(imagePixels(b64(gifOfSize(32, 16)))).toEqual({ width: 32, height: 16 });
    expect(imagePixels(b64(webpOfSize(4000, 3000)))).toEqual({ width: 4000, height: 3000 });
  });

  it('null for what gives no size: not base64 of an image, a format the API does not take, a size of 0, a JPEG frame header past the first 256 KiB', () => {
    expect(imagePixels(Buffer.alloc(225_000, 7).toString('base64'))).toBeNull();
    expect(imagePixels('not base64 at all ~~~')).toBeNull();
    expect(imagePixels('')).toBeNull();
    // A BMP header (image-size reads BMP; the Messages API does not take it).
    const bmp = Buffer.alloc(26);
    bmp.write('BM', 0, 'latin1');
    bmp.writeUInt32LE(40, 14);
    bmp.writeInt32LE(100, 18);
    bmp.writeInt32LE(100, 22);
    expect(imagePixels(b64(bmp))).toBeNull();
    expect(imagePixels(b64(pngOfSize(0, 100)))).toBeNull();
    expect(imagePixels(b64(jpegOfSize(640, 480, 300_000)))).toBeNull();
  });

  it('a truncated header is null every time, never completed from other bytes in memory', () => {
    // A PNG's IHDR cut after its width, and GIF89a alone: image-size read the rest past the decoded
    // bytes, from Node's shared buffer pool (46 different sizes in 400 calls, other requests' bytes).
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000002ee', 'hex').toString('base64');
    const gif = Buffer.from('GIF89a', 'latin1').toString('base64');
    for (let i = 0; i < 400; i++) {
      Buffer.from(`{"secret":"sk-live-${i}-ABCDEFGH"}`.repeat(1 + (i % 7)));
      expect(imagePixels(png)).toBeNull();
      expect(imagePixels(gif)).toBeNull();
    }
  });

  it('a JPEG marker followed by 20 MB of junk: null, from the first 256 KiB only', () => {
    const junk = Buffer.alloc(20_000_000, 0x41);
    junk.set([0xff, 0xd8], 0);
    expect(imagePixels(b64(junk))).toBeNull();
  });
});

describe('imagePatchTokens: 28-px patches after scaling to the model\'s native resolution', () => {
  it('an image within it is ⌈w / 28⌉ × ⌈h / 28⌉', () => {
    expect(imagePatchTokens(200, 200, CLAUDE_4_6)).toBe(64);
    expect(imagePatchTokens(320, 240, CLAUDE_4_6)).toBe(108);
    expect(imagePatchTokens(1000, 1000, CLAUDE_4_6)).toBe(1_296);
    expect(imagePatchTokens(1, 1, CLAUDE_4_6)).toBe(1);
    expect(imagePatchTokens(2000, 1500, OPUS_4_7)).toBe(3_888);
  });

  it('a long edge past the limit scales the image down to it, at least a pixel a side', () => {
    // 4,000 × 100 to 1,568 × 39: 56 × 2 patches.
    expect(imagePatchTokens(4000, 100, CLAUDE_4_6)).toBe(112);
    expect(imagePatchTokens(1, 8000, CLAUDE_4_6)).toBe(56);
  });

  it('an image past the tokens limit is at most the limit, however large its header says it is', () => {
    expect(imagePatchTokens(3000, 2000, CLAUDE_4_6)).toBeLessThanOrEqual(1_568);
    expect(imagePatchTokens(3000, 2000, CLAUDE_4_6)).toBeGreaterThan(1_450);
    expect(imagePatchTokens(4000, 3000, OPUS_4_7)).toBeLessThanOrEqual(4_784);
    expect(imagePatchTokens(0xffffffff, 0xffffffff, OPUS_4_7)).toBeLessThanOrEqual(4_784);
  });
});

describe('estimatedImageTokens and the prompt count', () => {
  it('an image whose size is not read (by URL, by file, data that is no image) is the model\'s most', () => {
    expect(estimatedImageTokens({ type: 'url', url: 'https://example.com/a.png' }, OPUS_4_7)).toBe(4_784);
    expect(estimatedImageTokens({ type: 'file', file_id: 'file_1' }, CLAUDE_4_6)).toBe(1_568);
    expect(estimatedImageTokens({ type: 'base64', media_type: 'image/png', data: 'AAAA' }, CLAUDE_4_6)).toBe(1_568);
    expect(estimatedImageTokens(null, CLAUDE_4_6)).toBe(1_568);
  });

  it('where the count is money, every image is its model\'s most, whatever its header says (a decoy frame header reads 16 × 16 in a 4,000 × 3,000 JPEG)', () => {
    const image = (data: Buffer, type = 'image/png') => ({ type: 'image', source: { type: 'base64', media_type: type, data: b64(data) } });
    const decoy = jpegWithDecoyFrame(4000, 3000, 16, 16);
    // What image-size reads of it, and why the money count reads no size.
    expect(imagePixels(b64(decoy))).toEqual({ width: 16, height: 16 });
    const body = {
      model: 'claude-opus-4-7',
      messages: [
        { role: 'user', content: [image(pngOfSize(2000, 1500)), image(decoy, 'image/jpeg'), { type: 'text', text: 'Compare.' }] },
        { role: 'assistant', content: 'Done.' },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [image(gifOfSize(32, 32), 'image/gif')] }] },
      ],
    };
    expect(promptParts(body, { imageScaling: OPUS_4_7 })).toEqual({ text: ['Compare.', 'Done.'], opaqueTokens: 3 * 4_784 + 3 * MESSAGE_OVERHEAD });
    expect(promptParts(body, { imageScaling: CLAUDE_4_6 }).opaqueTokens).toBe(3 * 1_568 + 3 * MESSAGE_OVERHEAD);
    expect(promptParts(body).opaqueTokens).toBe(3 * IMAGE_TOKENS + 3 * MESSAGE_OVERHEAD);
    // count_tokens' estimate reads the sizes (the decoy fools only its own sender's estimate).
    expect(promptParts(body, { imageScaling: OPUS_4_7, estimateMedia: true }).opaqueTokens).toBe(3_888 + 1 + 4 + 3 * MESSAGE_OVERHEAD);
  });
});
