import { describe, expect, it } from 'vitest';
import { imageScaling } from '../../core/pricing/input-bound.js';
import { gifOfSize, jpegOfSize, pngOfSize, webpOfSize } from '../../tests/harness/image-headers.js';
import { imageBlockTokens, imagePixels, scaledImageTokens } from './image-tokens.js';
import { IMAGE_TOKENS, MESSAGE_OVERHEAD, promptParts } from './prompt-text.js';

const b64 = (b: Buffer) => b.toString('base64');
const CLAUDE_4_6 = imageScaling('claude-sonnet-4-6')!;
const OPUS_4_7 = imageScaling('claude-opus-4-7')!;

describe('imageScaling: how a model sizes an image', () => {
  it('the Claude models up to 4.6: 1,568 px, 1,600 tokens; Opus 4.7 and later Claude models: 2,576 px, 5,000 tokens; no other model', () => {
    for (const m of ['claude-3-5-sonnet-20241022', 'claude-3-haiku-20240307', 'claude-sonnet-4-5', 'claude-haiku-4-5-20251001', 'claude-opus-4-6', 'anthropic/claude-opus-4-1']) {
      expect(imageScaling(m), m).toEqual({ longEdge: 1_568, tokens: 1_600 });
    }
    // Bedrock's and Vertex's names for the same models.
    for (const m of ['anthropic.claude-3-haiku-20240307-v1:0', 'us.anthropic.claude-sonnet-4-20250514-v1:0', 'claude-opus-4-1@20250805', 'claude-3-5-sonnet-v2@20241022']) {
      expect(imageScaling(m), m).toEqual({ longEdge: 1_568, tokens: 1_600 });
    }
    for (const m of ['claude-opus-4-7', 'claude-opus-4-7-20260101', 'claude-opus-5', 'claude-sonnet-4-8', 'claude-opus-4-7@20260416']) expect(imageScaling(m), m).toEqual({ longEdge: 2_576, tokens: 5_000 });
    for (const m of ['gpt-4o', 'gpt-4o-mini', 'acme-vision-1', '']) expect(imageScaling(m), m).toBeUndefined();
  });
});

describe('imagePixels: the size a base64 image\'s header gives', () => {
  it('reads PNG, JPEG (past 300 KB of APP segments), GIF and WebP', () => {
    expect(imagePixels(b64(pngOfSize(2000, 1500)))).toEqual({ width: 2000, height: 1500 });
    expect(imagePixels(b64(jpegOfSize(640, 480)))).toEqual({ width: 640, height: 480 });
    expect(imagePixels(b64(jpegOfSize(640, 480, 300_000)))).toEqual({ width: 640, height: 480 });
    expect(imagePixels(b64(gifOfSize(32, 16)))).toEqual({ width: 32, height: 16 });
    expect(imagePixels(b64(webpOfSize(4000, 3000)))).toEqual({ width: 4000, height: 3000 });
  });

  it('null for what gives no size: not base64 of an image, a format the API does not take, a size of 0, a JPEG frame header past the first MiB', () => {
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
    expect(imagePixels(b64(jpegOfSize(640, 480, 1_200_000)))).toBeNull();
  });

  it('a JPEG marker followed by 20 MB of junk: null, from the first MiB only', () => {
    const junk = Buffer.alloc(20_000_000, 0x41);
    junk.set([0xff, 0xd8], 0);
    expect(imagePixels(b64(junk))).toBeNull();
  });
});

describe('scaledImageTokens: width × height / 750 after scaling to the model\'s largest size', () => {
  it('an image within the limits is billed as it is, rounded up', () => {
    expect(scaledImageTokens(200, 200, CLAUDE_4_6)).toBe(54);
    expect(scaledImageTokens(32, 32, CLAUDE_4_6)).toBe(2);
    expect(scaledImageTokens(1, 1, CLAUDE_4_6)).toBe(1);
    expect(scaledImageTokens(2000, 1500, OPUS_4_7)).toBe(4_000);
  });

  it('a long edge past the limit scales the image down to it', () => {
    // 4,000 × 100 to 1,568 × 39.2: 61,465.6 px.
    expect(scaledImageTokens(4000, 100, CLAUDE_4_6)).toBe(82);
    expect(scaledImageTokens(4000, 100, OPUS_4_7)).toBe(Math.ceil((2576 * 64.4) / 750));
  });

  it('an image past the tokens limit is billed at the limit, however large its header says it is', () => {
    expect(scaledImageTokens(3000, 2000, CLAUDE_4_6)).toBe(1_600);
    expect(scaledImageTokens(3000, 2000, OPUS_4_7)).toBe(5_000);
    expect(scaledImageTokens(0xffffffff, 0xffffffff, OPUS_4_7)).toBe(5_000);
  });
});

describe('imageBlockTokens and the prompt count', () => {
  it('an image whose size is not read (by URL, by file, data that is no image) is the model\'s most', () => {
    expect(imageBlockTokens({ type: 'url', url: 'https://example.com/a.png' }, OPUS_4_7)).toBe(5_000);
    expect(imageBlockTokens({ type: 'file', file_id: 'file_1' }, CLAUDE_4_6)).toBe(1_600);
    expect(imageBlockTokens({ type: 'base64', media_type: 'image/png', data: 'AAAA' }, CLAUDE_4_6)).toBe(1_600);
    expect(imageBlockTokens(null, CLAUDE_4_6)).toBe(1_600);
  });

  it('promptParts counts each image by its size with imageScaling, IMAGE_TOKENS without', () => {
    const image = (data: Buffer, type = 'image/png') => ({ type: 'image', source: { type: 'base64', media_type: type, data: b64(data) } });
    const body = {
      model: 'claude-opus-4-7',
      messages: [
        { role: 'user', content: [image(pngOfSize(2000, 1500)), image(jpegOfSize(320, 240), 'image/jpeg'), { type: 'text', text: 'Compare.' }] },
        { role: 'assistant', content: 'Done.' },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [image(gifOfSize(32, 32), 'image/gif')] }] },
      ],
    };
    expect(promptParts(body, { imageScaling: OPUS_4_7 })).toEqual({ text: ['Compare.', 'Done.'], opaqueTokens: 4_000 + 103 + 2 + 3 * MESSAGE_OVERHEAD });
    expect(promptParts(body, { imageScaling: CLAUDE_4_6 }).opaqueTokens).toBe(1_600 + 103 + 2 + 3 * MESSAGE_OVERHEAD);
    expect(promptParts(body).opaqueTokens).toBe(3 * IMAGE_TOKENS + 3 * MESSAGE_OVERHEAD);
  });
});
