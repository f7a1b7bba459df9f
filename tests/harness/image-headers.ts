// Images of a given size as their headers give it, for tests of what reads an image's size
// (relay/token-count/image-tokens.ts): the header is real, the pixel data absent (the relay reads
// only the size; a provider is never asked to decode these).
import { crc32 } from 'node:zlib';

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** A PNG's signature, IHDR (8-bit RGB) and IEND. */
export function pngOfSize(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), pngChunk('IHDR', ihdr), pngChunk('IEND', Buffer.alloc(0))]);
}

/** A JPEG: SOI, a JFIF APP0, `padding` bytes of an APP1 segment (as EXIF or XMP are), a baseline SOF0, EOI. */
export function jpegOfSize(width: number, height: number, padding = 0): Buffer {
  const app0 = Buffer.from([0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00]);
  const segments: Buffer[] = [Buffer.from([0xff, 0xd8]), app0];
  for (let left = padding; left > 0;) {
    const size = Math.min(left, 65_000);
    const app1 = Buffer.alloc(4 + size, 0x20);
    app1.set([0xff, 0xe1], 0);
    app1.writeUInt16BE(size + 2, 2);
    segments.push(app1);
    left -= size;
  }
  const sof = Buffer.from([0xff, 0xc0, 0x00, 0x11, 0x08, 0, 0, 0, 0, 0x03, 0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01]);
  sof.writeUInt16BE(height, 5);
  sof.writeUInt16BE(width, 7);
  segments.push(sof, Buffer.from([0xff, 0xd9]));
  return Buffer.concat(segments);
}

/** A GIF89a's header and logical screen descriptor. */
export function gifOfSize(width: number, height: number): Buffer {
  const b = Buffer.alloc(13);
  b.write('GIF89a', 0, 'latin1');
  b.writeUInt16LE(width, 6);
  b.writeUInt16LE(height, 8);
  return b;
}

/** An extended WebP (RIFF, VP8X with its canvas size). */
export function webpOfSize(width: number, height: number): Buffer {
  const vp8x = Buffer.alloc(10);
  vp8x.writeUIntLE(width - 1, 4, 3);
  vp8x.writeUIntLE(height - 1, 7, 3);
  const chunk = Buffer.concat([Buffer.from('VP8X', 'latin1'), Buffer.from([10, 0, 0, 0]), vp8x]);
  const riff = Buffer.alloc(12);
  riff.write('RIFF', 0, 'latin1');
  riff.writeUInt32LE(4 + chunk.length, 4);
  riff.write('WEBP', 8, 'latin1');
  return Buffer.concat([riff, chunk]);
}

/**
 * A JPEG whose frame header (`width` × `height`) follows a fill byte (0xFF, which JPEG allows before
 * any marker and decoders skip) and is followed by a comment holding a decoy frame header: image-size
 * reads the fill byte's next two bytes as a segment length, jumps 49,152 bytes ahead and lands in the
 * comment, on the decoy's size (the review imagecount's file, which libjpeg decodes at its real size).
 */
export function jpegWithDecoyFrame(width: number, height: number, decoyWidth: number, decoyHeight: number): Buffer {
  const real = jpegOfSize(width, height);
  const sofAt = real.indexOf(Buffer.from([0xff, 0xc0]));
  const sof = real.subarray(sofAt, sofAt + 2 + real.readUInt16BE(sofAt + 2));
  const decoy = Buffer.from(sof);
  decoy.writeUInt16BE(decoyHeight, 5);
  decoy.writeUInt16BE(decoyWidth, 7);
  // The walker, at the byte after the fill byte (C0), reads C0 00 as a length: 0xC000 bytes on.
  const at = 0xc000 - (sof.length - 1) - 4;
  const payload = Buffer.alloc(at + decoy.length + 8, 0x20);
  decoy.copy(payload, at);
  const com = Buffer.alloc(4);
  com.set([0xff, 0xfe], 0);
  com.writeUInt16BE(payload.length + 2, 2);
  return Buffer.concat([real.subarray(0, sofAt), Buffer.from([0xff]), sof, com, payload, real.subarray(sofAt + sof.length)]);
}
