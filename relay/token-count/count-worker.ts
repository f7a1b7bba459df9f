// The counting worker (run by piscina from dist/relay/token-count/count-worker.js): one task at a time per
// thread, ranks loaded once per thread. Tasks are plain data; see TokenCounter for the API.
import { countText, countWithCarry, warmUp, type Encoding } from './bpe-count.js';
import { decodePieces } from './delta-text.js';
import { promptParts, type PromptOptions } from './prompt-text.js';

/** `encoding`: cl100k_base when absent (encoding-of.ts says which model takes which). */
export type CountTask = (
  | { kind: 'text'; text: string }
  /**
   * `json` is the raw request body (parsed here, off the event loop); `body` an already parsed one;
   * `options` how documents are counted (prompt-text.ts).
   */
  | { kind: 'prompt'; json?: Uint8Array; body?: unknown; options?: PromptOptions }
  /**
   * Delivered text as DeliveredTextCounter keeps it: the raw JSON string contents of the deltas' text,
   * one piece per line (delta-text.ts); `carry` from the previous batch.
   */
  | { kind: 'deltas'; data: Uint8Array; carry: string; final: boolean }
) & { encoding?: Encoding };

export type CountResult = { count: number; carry: string };

warmUp();

export default function count(task: CountTask): CountResult {
  switch (task.kind) {
    case 'text':
      return { count: countText(task.text, task.encoding), carry: '' };
    case 'prompt': {
      let body = task.body;
      if (task.json) body = JSON.parse(Buffer.from(task.json.buffer, task.json.byteOffset, task.json.byteLength).toString('utf8'));
      const parts = promptParts(body, task.options);
      let n = parts.opaqueTokens;
      for (const t of parts.text) n += countText(t, task.encoding);
      return { count: n, carry: '' };
    }
    case 'deltas': {
      const text = decodePieces(Buffer.from(task.data.buffer, task.data.byteOffset, task.data.byteLength));
      return countWithCarry(task.carry + text, task.final, true, task.encoding);
    }
  }
}
