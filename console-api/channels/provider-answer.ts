// What the console reads of a provider's answer to a channel test or probe: its first bytes only (an
// upstream may send anything, of any size), and its error type, never its message (which can echo the
// channel's key).

/** The first `limit` bytes of a body as text; the rest is not read. */
export async function readHead(body: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= limit) break;
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}

/** The provider's error type when the body has Anthropic's (or OpenAI's) shape; never its message. */
export function providerErrorType(text: string): string | undefined {
  try {
    const error = (JSON.parse(text) as { error?: { type?: unknown; code?: unknown } })?.error;
    const type = error?.type ?? error?.code;
    return typeof type === 'string' && /^[A-Za-z][A-Za-z0-9_]{0,63}$/.test(type) ? type : undefined;
  } catch {
    return undefined;
  }
}
