// Writes a streamed message: the head, one delta per output token (the thinking's first, when the
// message thinks, then what closes the thinking block and opens the text's), then the ending the knobs chose
// (the tail, an `event: error`, or a dropped socket). Paced by the token delays; with none, deltas
// are batched into few writes. Never writes past uWS' backpressure: it waits for the drain instead.
import { waitDrain, type Exchange } from './exchange.js';
import { DELTA_EVENT, OVERLOADED_EVENT } from './wire-format.js';

/** With no token delay, a stream is written in writes of at most this many deltas. */
const DELTAS_PER_WRITE = 256;

export interface MessageStream {
  /** Sent with the response head, before any delta. */
  head: string;
  /** Sent after the last delta when the stream completes. */
  tail: string;
  outputTokens: number;
  failAfterTokens: number | undefined;
  streamErrorAfterTokens: number | undefined;
  tokenDelayMs: number;
  firstTokenDelayMs: number;
  /** One output token's event; default Anthropic's text delta (the OpenAI mock passes its chunk). */
  delta?: string;
  /** The mid-stream failure; default Anthropic's overloaded `event: error`. */
  errorEvent?: string;
  /** Thinking tokens streamed before the text's (each `thinkingDelta`), then `thinkingEnd`; counted in outputTokens. */
  thinkingTokens?: number;
  thinkingDelta?: string;
  thinkingEnd?: string;
}

export interface StreamCounters {
  errors: number;
  dropped: number;
  tokensStreamed: number;
}

export function writeStream(
  ex: Exchange,
  stream: MessageStream,
  io: {
    counters: StreamCounters;
    finish: (ex: Exchange) => void;
    /** Status line and headers; called inside the cork that writes the head. */
    writeResponseHead: () => void;
  },
): void {
  const { counters, finish } = io;
  const { head, tail, tokenDelayMs: tokenDelay, firstTokenDelayMs: firstDelay } = stream;
  const failAfter = stream.failAfterTokens;
  const errorAfter = stream.streamErrorAfterTokens;
  // Where the deltas stop, and what happens there.
  let stopAt = stream.outputTokens;
  let ending: 'complete' | 'drop' | 'error' = 'complete';
  if (errorAfter !== undefined && errorAfter < stopAt) { stopAt = errorAfter; ending = 'error'; }
  if (failAfter !== undefined && failAfter < stopAt) { stopAt = failAfter; ending = 'drop'; }

  let sent = 0;
  const res = ex.res;
  const delta = stream.delta ?? DELTA_EVENT;
  const errorEvent = stream.errorEvent ?? OVERLOADED_EVENT;
  const thinking = stream.thinkingTokens ?? 0;
  let thinkingOpen = thinking > 0;
  /** The events of tokens [sent, sent + count): thinking deltas, the thinking's end where it ends, text deltas. */
  const events = (count: number): string => {
    if (!thinkingOpen) return count === 1 ? delta : delta.repeat(count);
    const thought = Math.min(count, thinking - sent);
    let out = stream.thinkingDelta!.repeat(thought);
    if (sent + count > thinking) {
      out += stream.thinkingEnd! + delta.repeat(sent + count - thinking);
      thinkingOpen = false;
    }
    return out;
  };

  const dropConnection = (): void => {
    counters.dropped++;
    finish(ex); // done before close(): the onAborted that close() triggers is not a client abort
    res.close();
  };

  /** Writes the next delta(s) and, at stopAt, the ending. Re-arms itself via timer/drain. */
  const step = (): void => {
    ex.timer = undefined;
    if (ex.aborted || ex.done) return;
    let count = tokenDelay > 0 ? 1 : DELTAS_PER_WRITE;
    count = Math.min(count, stopAt - sent);
    let ok = true;
    res.cork(() => {
      if (count > 0) {
        // uWS buffers all of a write(); false = backpressure: produce nothing more until the drain.
        ok = res.write(events(count));
        sent += count;
        counters.tokensStreamed += count;
      }
      if (sent < stopAt) return;
      if (ending === 'complete') {
        // A message that only thought (no text token): its thinking block still ends, and the text's opens.
        if (thinkingOpen) {
          thinkingOpen = false;
          res.end(stream.thinkingEnd! + tail);
        } else res.end(tail);
        finish(ex);
      } else if (ending === 'error') {
        counters.errors++;
        res.end(errorEvent);
        finish(ex);
      }
    });
    if (ex.done) return;
    if (sent >= stopAt) {
      // ending === 'drop': close once what was written has left uWS' buffer (close discards it).
      if (ok) dropConnection();
      else waitDrain(ex, dropConnection);
      return;
    }
    const next = (): void => {
      if (tokenDelay > 0) ex.timer = setTimeout(step, tokenDelay);
      else ex.timer = setImmediate(step);
    };
    if (ok) next();
    else waitDrain(ex, next);
  };

  let ok = true;
  res.cork(() => {
    io.writeResponseHead();
    ok = res.write(head);
  });
  const first = (): void => {
    if (stopAt > 0 && firstDelay > 0) ex.timer = setTimeout(step, firstDelay);
    else step();
  };
  if (ok) first();
  else waitDrain(ex, first);
}
