// An image's tokens from its own size, where the provider stated none (a stream cut before its
// message_start, a provider that reports no usage) and in count_tokens' estimate: Anthropic scales an
// image down to its model's largest size and bills (width × height) / 750 tokens (ImageScaling,
// core/pricing/input-bound.ts). The size is read from the header of the image's base64 data
// (image-size); an image whose size cannot be read (by URL or file_id, a header not found in the
// data's first MiB, data that is no image) is taken at its model's most. Runs on the counting workers.
import { disableTypes, imageSize, types } from 'image-size';
import { PIXELS_PER_IMAGE_TOKEN, type ImageScaling } from '../../core/pricing/input-bound.js';

// Only the formats the Messages API takes (image/jpeg, png, gif, webp): the other readers are never
// needed, and each one fewer is less of a hostile header's surface.
const READ_TYPES: ReadonlyArray<string> = ['jpg', 'png', 'gif', 'webp'];
disableTypes(types.filter((type) => !READ_TYPES.includes(type)));

/**
 * How much of the base64 data is decoded to find the size: a JPEG's frame header comes after its
 * EXIF, ICC and XMP segments (64 KiB each at most, rarely more than a few), a PNG's, GIF's or WebP's in
 * the first bytes. Bounded, since image-size's JPEG reader steps a byte at a time through data that
 * is not JPEG: a 20 MB body of junk would hold a worker for seconds.
 */
const SIZE_SCAN_BASE64_CHARS = 4 * Math.ceil((1 << 20) / 3);

/** The pixels of a base64 image, or null when its header gives no positive size. */
export function imagePixels(base64: string): { width: number; height: number } | null {
  let size: { width?: number; height?: number };
  try {
    const head = base64.length > SIZE_SCAN_BASE64_CHARS ? base64.slice(0, SIZE_SCAN_BASE64_CHARS) : base64;
    size = imageSize(Buffer.from(head, 'base64'));
  } catch {
    return null;
  }
  const { width, height } = size;
  if (typeof width !== 'number' || typeof height !== 'number' || !(width > 0) || !(height > 0) || !Number.isFinite(width * height)) return null;
  return { width, height };
}

/**
 * The tokens an image of `width` × `height` px costs on a model sizing images as `scaling`: scaled
 * down (aspect kept) to a long edge of at most `longEdge` and at most `tokens`, then one token per
 * 750 px, rounded up. Never above `scaling.tokens`.
 */
export function scaledImageTokens(width: number, height: number, scaling: ImageScaling): number {
  const pixels = width * height;
  const scale = Math.min(1, scaling.longEdge / Math.max(width, height), Math.sqrt((scaling.tokens * PIXELS_PER_IMAGE_TOKEN) / pixels));
  return Math.min(scaling.tokens, Math.max(1, Math.ceil((pixels * scale * scale) / PIXELS_PER_IMAGE_TOKEN)));
}

/** An image block's tokens by `source`: its base64 data's size, else the model's most. */
export function imageBlockTokens(source: unknown, scaling: ImageScaling): number {
  const s = source && typeof source === 'object' ? source as Record<string, unknown> : null;
  if (s === null || s.type !== 'base64' || typeof s.data !== 'string') return scaling.tokens;
  const pixels = imagePixels(s.data);
  return pixels === null ? scaling.tokens : scaledImageTokens(pixels.width, pixels.height, scaling);
}
