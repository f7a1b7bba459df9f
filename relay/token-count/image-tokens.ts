// What an image counts for in the relay's own prompt count, on a model whose image sizing is known
// (ImageScaling, core/pricing/input-bound.ts):
//   - where the count is money (a prompt the provider stated no usage for): the most an image costs on
//     the model, whatever its size. An image's size is a fact of its header only as far as the
//     header's reader and the provider's decoder agree, and a crafted file makes them disagree
//     (a JPEG with a fill byte before its frame header and a decoy one in a comment, read as 16 × 16
//     by image-size and as 4,000 × 3,000 by libjpeg, was billed 1 token for 4,784);
//   - in count_tokens' answer, an estimate the client asked for: by its size, read from the header of
//     its base64 data (image-size), scaled and cut into 28-px patches as the model does; an image by
//     URL or file_id, or whose size does not show, at the model's most.
// Runs on the counting workers.
import { disableTypes, imageSize, types } from 'image-size';
import { IMAGE_PATCH_PX, type ImageScaling } from '../../core/pricing/input-bound.js';

// Only the formats the Messages API takes (image/jpeg, png, gif, webp): the other readers are never
// needed, and each one fewer is less of a hostile header's surface.
const READ_TYPES: ReadonlyArray<string> = ['jpg', 'png', 'gif', 'webp'];
disableTypes(types.filter((type) => !READ_TYPES.includes(type)));

/**
 * How much of the base64 data is decoded to find the size: a JPEG's frame header comes after its
 * EXIF, ICC and XMP segments (64 KiB each at most, rarely more than a few), a PNG's, GIF's or WebP's in
 * the first bytes. Bounded, since image-size's JPEG reader steps a byte at a time through data that
 * is not JPEG (a 1 MiB scan of such data held a worker ~140 ms); a frame header past it only costs
 * count_tokens' estimate its precision (the model's most), as no money depends on the size.
 */
const SIZE_SCAN_BASE64_CHARS = 4 * Math.ceil((256 * 1024) / 3);

/** The pixels of a base64 image, or null when its header gives no positive size. */
export function imagePixels(base64: string): { width: number; height: number } | null {
  let size: { width?: number; height?: number };
  try {
    const head = base64.length > SIZE_SCAN_BASE64_CHARS ? base64.slice(0, SIZE_SCAN_BASE64_CHARS) : base64;
    // A copy with an ArrayBuffer of its own: image-size reads through DataViews of the input's buffer
    // without checking the input's length, and a small Buffer.from shares Node's 8 KiB pool, so a
    // truncated header's missing height was read from whatever the pool held next (another request's
    // bytes on the same worker). Past its own buffer, the read throws.
    size = imageSize(Uint8Array.from(Buffer.from(head, 'base64')));
  } catch {
    return null;
  }
  const { width, height } = size;
  if (typeof width !== 'number' || typeof height !== 'number' || !(width > 0) || !(height > 0) || !Number.isFinite(width * height)) return null;
  return { width, height };
}

/**
 * The visual tokens of an image of `width` × `height` px on a model sizing images as `scaling`:
 * scaled down (aspect kept, whole pixels, at least one a side) to a long edge of at most `longEdge`
 * and at most `tokens` patches, then ⌈w / 28⌉ × ⌈h / 28⌉. Never above `scaling.tokens`.
 */
export function imagePatchTokens(width: number, height: number, scaling: ImageScaling): number {
  const patchPixels = IMAGE_PATCH_PX * IMAGE_PATCH_PX;
  const scale = Math.min(1, scaling.longEdge / Math.max(width, height), Math.sqrt((scaling.tokens * patchPixels) / (width * height)));
  const w = Math.max(1, Math.floor(width * scale));
  const h = Math.max(1, Math.floor(height * scale));
  return Math.min(scaling.tokens, Math.ceil(w / IMAGE_PATCH_PX) * Math.ceil(h / IMAGE_PATCH_PX));
}

/** count_tokens' estimate of an image block by `source`: its base64 data's size, else the model's most. */
export function estimatedImageTokens(source: unknown, scaling: ImageScaling): number {
  const s = source && typeof source === 'object' ? source as Record<string, unknown> : null;
  if (s === null || s.type !== 'base64' || typeof s.data !== 'string') return scaling.tokens;
  const pixels = imagePixels(s.data);
  return pixels === null ? scaling.tokens : imagePatchTokens(pixels.width, pixels.height, scaling);
}
