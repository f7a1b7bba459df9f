// Reads Anthropic's SSE stream as it passes through, chunk by chunk, and keeps only the usage:
// message_start (input and cache tokens), message_delta (output tokens) and error events are parsed;
// the lines of every other event are skipped by scanning for newlines, without decoding or copying.
// Nothing of the stream is retained beyond one partial line.
//
// With an `onContentDelta` hook, the `data:` payload of each content_block_delta event is handed to it
// as raw bytes (a view, valid only during the call: copy to keep), still without decoding; that is what
// DeliveredTextCounter (relay/tokens/) counts when a stream ends without usage.

const NL = 0x0a;
const CR = 0x0d;
const EVENT = Buffer.from('event:');
const DATA = Buffer.from('data:');

const enum Ev { None, MessageStart, MessageDelta, Error, ContentDelta, Other }

function eventOf(name: string): Ev {
  switch (name) {
    case 'message_start': return Ev.MessageStart;
    case 'message_delta': return Ev.MessageDelta;
    case 'error': return Ev.Error;
    default: return Ev.Other;
  }
}

export interface StreamUsage {
  inputTokens: number;
  outputTokens: number;
  cacheCreationTokens: number;
  cacheReadTokens: number;
}

export class SseUsageParser implements StreamUsage {
  inputTokens = 0;
  outputTokens = 0;
  cacheCreationTokens = 0;
  cacheReadTokens = 0;
  sawMessageStart = false;
  sawMessageDelta = false;
  sawMessageStop = false;
  /** Count of content_block_delta events passed through. */
  contentDeltas = 0;
  error: { type: string; message: string } | null = null;
  /** Receives the raw `data:` payload of every content_block_delta (a view into the chunk: copy to keep). */
  onContentDelta: ((data: Buffer) => void) | null;

  #event = Ev.None;
  /** The start of a line that continues in a later chunk, in parts (each copied). */
  #carry: Buffer[] = [];
  /** Inside a line that started in an earlier chunk and is of no interest. */
  #skipping = false;

  constructor(onContentDelta?: (data: Buffer) => void) {
    this.onContentDelta = onContentDelta ?? null;
  }

  push(chunk: Buffer): void {
    let pos = 0;
    if (this.#skipping) {
      const nl = chunk.indexOf(NL);
      if (nl < 0) return;
      this.#skipping = false;
      pos = nl + 1;
    }
    if (this.#carry.length > 0) {
      // A line spanning many chunks is joined once, when its end arrives.
      const nl = chunk.indexOf(NL);
      if (nl < 0) {
        this.#carry.push(Buffer.from(chunk));
        return;
      }
      this.#carry.push(chunk.subarray(0, nl));
      const line = Buffer.concat(this.#carry);
      this.#carry = [];
      let end = line.length;
      if (end > 0 && line[end - 1] === CR) end--;
      this.#line(line, 0, end);
      pos = nl + 1;
    }
    const buf = chunk;
    while (pos < buf.length) {
      const nl = buf.indexOf(NL, pos);
      if (nl < 0) {
        this.#keepPartial(buf, pos);
        return;
      }
      let end = nl;
      if (end > pos && buf[end - 1] === CR) end--;
      this.#line(buf, pos, end);
      pos = nl + 1;
    }
  }

  #keepPartial(buf: Buffer, pos: number): void {
    const rest = buf.length - pos;
    // A data line of an event we skip needs only its end found, not its bytes.
    if (this.#event === Ev.Other && rest >= DATA.length && buf.compare(DATA, 0, DATA.length, pos, pos + DATA.length) === 0) {
      this.#skipping = true;
      return;
    }
    this.#carry.push(Buffer.from(buf.subarray(pos)));
  }

  #line(buf: Buffer, start: number, end: number): void {
    if (start === end) {
      this.#event = Ev.None;
      return;
    }
    if (startsWith(buf, start, end, EVENT)) {
      const name = buf.toString('latin1', start + EVENT.length, end).trim();
      this.#event = eventOf(name);
      if (name === 'content_block_delta') {
        this.contentDeltas++;
        if (this.onContentDelta) this.#event = Ev.ContentDelta;
      } else if (name === 'message_stop') this.sawMessageStop = true;
      return;
    }
    if (!startsWith(buf, start, end, DATA)) return;
    if (this.#event === Ev.Other) return;
    if (this.#event === Ev.ContentDelta) {
      this.onContentDelta!(buf.subarray(start + DATA.length, end));
      return;
    }
    let payload: Record<string, unknown>;
    try {
      payload = JSON.parse(buf.toString('utf8', start + DATA.length, end)) as Record<string, unknown>;
    } catch {
      return;
    }
    // Streams without `event:` lines still carry the type in the data.
    const ev = this.#event === Ev.None ? eventOf(String(payload.type)) : this.#event;
    if (ev === Ev.MessageStart) {
      const usage = (payload.message as { usage?: Record<string, unknown> } | undefined)?.usage;
      this.sawMessageStart = true;
      if (usage) {
        this.inputTokens = num(usage.input_tokens);
        this.cacheCreationTokens = num(usage.cache_creation_input_tokens);
        this.cacheReadTokens = num(usage.cache_read_input_tokens);
        this.outputTokens = num(usage.output_tokens);
      }
    } else if (ev === Ev.MessageDelta) {
      const usage = payload.usage as Record<string, unknown> | undefined;
      this.sawMessageDelta = true;
      if (usage) {
        // message_delta's counts are cumulative; input may be restated by some providers.
        if (usage.output_tokens !== undefined) this.outputTokens = num(usage.output_tokens);
        if (usage.input_tokens !== undefined && usage.input_tokens !== null) this.inputTokens = num(usage.input_tokens);
      }
    } else if (ev === Ev.Other && this.#event === Ev.None && payload.type === 'content_block_delta') {
      this.onContentDelta?.(buf.subarray(start + DATA.length, end));
    } else if (ev === Ev.Error) {
      const err = payload.error as { type?: unknown; message?: unknown } | undefined;
      this.error = { type: String(err?.type ?? 'api_error'), message: String(err?.message ?? '') };
    }
  }
}

function startsWith(buf: Buffer, start: number, end: number, prefix: Buffer): boolean {
  return end - start >= prefix.length && buf.compare(prefix, 0, prefix.length, start, start + prefix.length) === 0;
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0;
}

/** Usage of a non-streaming Message JSON body. */
export function usageOfMessage(body: unknown): StreamUsage | null {
  const usage = (body as { usage?: Record<string, unknown> } | null)?.usage;
  if (!usage) return null;
  return {
    inputTokens: num(usage.input_tokens),
    outputTokens: num(usage.output_tokens),
    cacheCreationTokens: num(usage.cache_creation_input_tokens),
    cacheReadTokens: num(usage.cache_read_input_tokens),
  };
}
