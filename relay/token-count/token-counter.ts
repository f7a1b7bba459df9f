// Token counting off the event loop: a piscina pool of worker threads running count-worker.ts
// (cl100k_base or o200k_base, see bpe-count.ts for what a count is). The event loop only posts the task (a copy of
// the bytes or of the string) and awaits the answer.
//
// The worker file is the compiled one, dist/relay/token-count/count-worker-entry.cjs (it says why it is
// CommonJS) loading count-worker.js: the services run from
// dist/ and find it next to this module; tests run this module from its .ts source and use the compiled
// file under the project root, so dist/ must be built first (`make test` and `make build` do).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { projectRoot } from '../../infra/project-root.js';
import type { CountResult, CountTask } from './count-worker.js';
import type { Encoding } from './bpe-count.js';
import type { PromptOptions } from './prompt-text.js';

export interface TokenCounterOptions {
  /** Threads kept alive. Default 1. */
  minThreads?: number;
  /** Most threads. Default 2 (config TOKEN_WORKERS). */
  maxThreads?: number;
  /**
   * Prompt counts (countPrompt) waiting for a thread beyond those running, before countPrompt refuses
   * with CountQueueFull. Default unbounded. Delivered-text batches are never refused (see the class).
   */
  maxQueue?: number;
  /**
   * Prompt counts one owner (an account) may hold places for at once, queued or running; past it
   * takePromptPlace answers 'owner_busy'. Default unbounded.
   */
  maxPerOwner?: number;
  /** Worker file; default: see the header. */
  workerFile?: string;
}

/** Where the compiled worker is, from dist/ or from the sources. */
export function countWorkerFile(): string {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.js')) return fileURLToPath(new URL('./count-worker-entry.cjs', import.meta.url));
  const file = join(projectRoot(), 'dist', 'relay', 'token-count', 'count-worker-entry.cjs');
  if (!existsSync(file)) {
    throw new Error(`token counter: ${file} is missing; build dist/ first (npx tsc -p tsconfig.json, or make build)`);
  }
  return file;
}

/** A place in the prompt queue (TokenCounter.takePromptPlace). */
export interface PromptPlace {
  /**
   * The prompt's tokens, counted in this place, which it then frees. `options.estimateMedia` for
   * count_tokens' answer only (prompt-text.ts): a reservation's count keeps the documents' bytes and
   * takes an image at its model's most, whatever size its header claims.
   */
  count(body: unknown, encoding?: Encoding, options?: PromptOptions): Promise<number>;
  /** Frees the place unused (nothing when it was used or freed already). */
  release(): void;
}

/** countPrompt refused at once: more prompt counts are waiting than maxQueue allows. */
export class CountQueueFull extends Error {
  constructor() {
    super('token count queue is full');
  }
}

/**
 * The bound is on prompt counts only, kept here rather than piscina's pool-wide maxQueue: prompt counts
 * are what a client can ask for at will (count_tokens, large bodies), and refusing one costs nothing.
 * Delivered-text batches bill text already delivered, so refusing them would lose money; they are
 * bounded anyway, per stream by DeliveredTextCounter's congestion (it pauses the provider).
 */
export class TokenCounter {
  readonly #pool: Piscina<CountTask, CountResult>;
  readonly #maxPrompts: number;
  readonly #maxPerOwner: number;
  /** Places held per owner; an owner holding none is not kept. */
  readonly #owners = new Map<number, number>();
  #prompts = 0;
  #closed = false;

  constructor(options: TokenCounterOptions = {}) {
    const maxThreads = Math.max(1, options.maxThreads ?? 2);
    this.#pool = new Piscina<CountTask, CountResult>({
      filename: options.workerFile ?? countWorkerFile(),
      minThreads: Math.min(maxThreads, Math.max(0, options.minThreads ?? 1)),
      maxThreads,
      idleTimeout: 60_000,
    });
    this.#maxPrompts = options.maxQueue === undefined ? Infinity : maxThreads + Math.max(0, options.maxQueue);
    this.#maxPerOwner = options.maxPerOwner === undefined ? Infinity : Math.max(1, options.maxPerOwner);
  }

  /** Tokens of a text (cl100k_base unless `encoding` says otherwise, here and below). */
  async countText(text: string, encoding?: Encoding): Promise<number> {
    return (await this.#run({ kind: 'text', text, encoding })).count;
  }

  /**
   * Prompt tokens of a Messages request body: system, every message's text, tool definitions, plus
   * fixed amounts for images and message framing (relay/token-count/prompt-text.ts lists what counts).
   * Pass the raw body bytes (Buffer/Uint8Array) to have it parsed in the worker as well: only a copy
   * of the bytes is made on the event loop, where a parsed object would be structured-cloned.
   */
  async countPrompt(body: unknown, encoding?: Encoding): Promise<number> {
    const place = this.takePromptPlace();
    if (place === null) throw new CountQueueFull();
    return place.count(body, encoding);
  }

  /**
   * A place in the prompt queue taken now, or null when it is full: taken before an await (the key's
   * budget of counts, in Redis), the count can no longer be refused after it. Checked after the
   * budget, a burst spent budget on counts the queue then refused (529), and the calls refused 429
   * meanwhile were spent for good. `count` runs the count in the place (once); `release` gives back
   * a place not used. 'owner_busy': `owner` holds maxPerOwner places already.
   */
  takePromptPlace(): PromptPlace | null;
  takePromptPlace(owner: number): PromptPlace | null | 'owner_busy';
  takePromptPlace(owner?: number): PromptPlace | null | 'owner_busy' {
    // Per owner first: one account sending many large counts at once (8 MB each, about a second of a
    // worker) made another's count of a line wait 18 s behind them; the queue is first come, first served.
    const ownerHeld = owner === undefined ? 0 : this.#owners.get(owner) ?? 0;
    if (ownerHeld >= this.#maxPerOwner) return 'owner_busy';
    if (this.#prompts >= this.#maxPrompts) return null;
    this.#prompts++;
    if (owner !== undefined) this.#owners.set(owner, ownerHeld + 1);
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      this.#prompts--;
      if (owner !== undefined) {
        const left = (this.#owners.get(owner) ?? 1) - 1;
        if (left > 0) this.#owners.set(owner, left);
        else this.#owners.delete(owner);
      }
    };
    return {
      count: async (body: unknown, encoding?: Encoding, options?: PromptOptions) => {
        if (!held) throw new Error('prompt place already used or released');
        try {
          return (await this.#run(promptTask(body, encoding, options))).count;
        } finally {
          release();
        }
      },
      release,
    };
  }

  /**
   * countPrompt for a settlement (a prompt its provider did not state): never refused for the queue's
   * length, since refused, a prompt the provider billed went unbilled. It still counts in the queue
   * that refuses count_tokens calls and reservation counts.
   */
  async countBilledPrompt(body: unknown, encoding?: Encoding, options?: PromptOptions): Promise<number> {
    this.#prompts++;
    try {
      return (await this.#run(promptTask(body, encoding, options))).count;
    } finally {
      this.#prompts--;
    }
  }

  /**
   * One batch of delivered text (used by DeliveredTextCounter): the raw JSON string contents of the
   * deltas' text, one piece per line.
   */
  countDeltas(data: Uint8Array, carry: string, final: boolean, encoding?: Encoding): Promise<CountResult> {
    return this.#run({ kind: 'deltas', data: exact(data), carry, final, encoding });
  }

  /** Threads currently running and tasks waiting, for metrics. */
  get stats(): { threads: number; queued: number; completed: number; prompts: number } {
    return { threads: this.#pool.threads.length, queued: this.#pool.queueSize, completed: this.#pool.completed, prompts: this.#prompts };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool.close({ force: true });
  }

  #run(task: CountTask): Promise<CountResult> {
    if (this.#closed) return Promise.reject(new Error('token counter is closed'));
    return this.#pool.run(task);
  }
}

/** A prompt's count task: raw bytes are parsed in the worker, an object is structured-cloned. */
function promptTask(body: unknown, encoding: Encoding | undefined, options?: PromptOptions): CountTask {
  return body instanceof Uint8Array ? { kind: 'prompt', json: exact(body), encoding, options } : { kind: 'prompt', body, encoding, options };
}

/** Posting a view copies its whole ArrayBuffer (a pooled Buffer shares an 8 KiB slab): copy just the view. */
function exact(view: Uint8Array): Uint8Array {
  return view.byteOffset === 0 && view.byteLength === view.buffer.byteLength ? view : new Uint8Array(view);
}

/**
 * The fewest tokens a counted estimate takes a body's bytes for: cl100k packs text that another
 * tokenizer may not (40,000 spaces are a few hundred of its tokens), and an estimate below the
 * provider's count lets a request cost more than it reserved. Ordinary text is 3-4 bytes a token, so
 * the floor leaves its estimate alone.
 */
export const MAX_ESTIMATED_BYTES_PER_TOKEN = 8;

/**
 * Input tokens to reserve for a request body of `bodyBytes` bytes: the byte length itself (a token is
 * at least one byte: a hard bound) when the prompt was not counted; when it was, the counted prompt
 * tokens, at least one per MAX_ESTIMATED_BYTES_PER_TOKEN bytes, times `factor` (the cl100k count is
 * not the provider's tokenizer), never more than the byte bound.
 */
export function reservationInputTokens(bodyBytes: number, counted: number | null, factor: number): number {
  if (counted === null) return bodyBytes;
  const estimate = Math.max(counted, Math.ceil(bodyBytes / MAX_ESTIMATED_BYTES_PER_TOKEN));
  return Math.min(bodyBytes, Math.ceil(estimate * factor) + 16);
}
