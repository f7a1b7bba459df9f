// Reading a provider's answer: its headers as one string each, and an error body with a size bound
// (a misbehaving provider or proxy must not make the relay buffer without limit).
import type { Dispatcher } from 'undici';

/** Largest error or JSON body read from a provider before it is passed on. */
const MAX_UPSTREAM_JSON = 32 * 1024 * 1024;

export function headerOf(v: string | string[] | undefined): string {
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

export async function readText(body: Dispatcher.ResponseData['body']): Promise<string> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > MAX_UPSTREAM_JSON) {
      body.destroy();
      break;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
