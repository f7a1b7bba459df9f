import { Tiktoken } from 'js-tiktoken/lite';
import ranks from 'js-tiktoken/ranks/cl100k_base';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { describe, expect, it } from 'vitest';
import { countText, countWithCarry, MAX_SEGMENT } from './bpe-count.js';
import { encodingOf } from './encoding-of.js';

const reference = new Tiktoken(ranks);
const ref = (s: string) => reference.encode(s, [], []).length;
const o200kReference = new Tiktoken(o200k);
const o200kRef = (s: string) => o200kReference.encode(s, [], []).length;

const SAMPLES = [
  '',
  'hello world',
  'The quick brown fox jumps over the lazy dog.\n\n  Indented   text\twith tabs\r\nand CRLF.\n',
  'Größenwahn naïve café — “quotes” 日本語のテキストです。中文文本没有空格。 Привет, мир! مرحبا بالعالم 🙂👍🏽',
  "it's we're they'll I'd DON'T",
  '12345678901 3.14159 1e10 0x7fff',
  'function f(x) {\n  return x * 2; // <|endoftext|> is plain text here\n}\n',
  'supercalifragilisticexpialidocious'.repeat(20),
  'tok '.repeat(500),
  Buffer.from(Array.from({ length: 1200 }, (_, i) => (i * 7919) % 256)).toString('base64'),
];

describe('countText (cl100k_base)', () => {
  it('equals js-tiktoken on text without forced cuts', () => {
    for (const s of SAMPLES) expect(countText(s), JSON.stringify(s.slice(0, 40))).toBe(ref(s));
  });

  it('equals js-tiktoken on a long mixed text', () => {
    const text = SAMPLES.join(' ').repeat(40);
    expect(countText(text)).toBe(ref(text));
  });

  it('counts a long run without word boundaries in linear time, close to the tokenizer', () => {
    const run = 'x'.repeat(200_000);
    const started = performance.now();
    const n = countText(run);
    expect(performance.now() - started).toBeLessThan(5_000);
    // One forced cut every MAX_SEGMENT characters changes the count by at most a token per cut.
    const exact = ref('x'.repeat(MAX_SEGMENT)) * (200_000 / MAX_SEGMENT);
    expect(Math.abs(n - exact)).toBeLessThanOrEqual(200_000 / MAX_SEGMENT + 2);
  });
});

describe('countText (o200k_base, GPT-4o and later)', () => {
  it('equals js-tiktoken on text without forced cuts, and differs from cl100k where the encodings do', () => {
    for (const s of SAMPLES) expect(countText(s, 'o200k_base'), JSON.stringify(s.slice(0, 40))).toBe(o200kRef(s));
    const text = SAMPLES.join(' ').repeat(40);
    expect(countText(text, 'o200k_base')).toBe(o200kRef(text));
    // Not one table for both: o200k packs the non-Latin text in fewer tokens.
    expect(countText(SAMPLES[3]!, 'o200k_base')).toBeLessThan(countText(SAMPLES[3]!));
  });

  it('sums batches cut anywhere to the count of the whole, as cl100k does', () => {
    const text = (SAMPLES.join('\n') + ' Don\'T  CamelCaseWords\tand\u00a0spaces ').repeat(20);
    const whole = countText(text, 'o200k_base');
    for (const [pieces, seed] of [[7, 2], [400, 4]] as const) {
      let carry = '';
      let sum = 0;
      let from = 0;
      for (const to of [...randomCuts(text.length, pieces, seed), text.length]) {
        const r = countWithCarry(carry + text.slice(from, to), to === text.length, false, 'o200k_base');
        sum += r.count;
        carry = r.carry;
        from = to;
      }
      expect(sum).toBe(whole);
    }
  });
});

describe('encodingOf', () => {
  it('counts GPT-4o and later OpenAI models in o200k_base, GPT-4, GPT-3.5, Claude and the rest in cl100k_base', () => {
    for (const m of ['gpt-4o', 'gpt-4o-mini', 'gpt-4o-2024-08-06', 'chatgpt-4o-latest', 'gpt-4.1', 'gpt-4.1-nano', 'gpt-4.5-preview',
      'gpt-5', 'gpt-5-mini', 'o1', 'o1-mini', 'o3', 'o4-mini', 'gpt-oss-120b', 'ft:gpt-4o-mini:org::abc']) expect(encodingOf(m), m).toBe('o200k_base');
    for (const m of ['gpt-4', 'gpt-4-turbo', 'gpt-3.5-turbo', 'claude-sonnet-4-5', 'claude-opus-4-1-20250805', 'deepseek-chat', 'o', 'omni', '']) {
      expect(encodingOf(m), m).toBe('cl100k_base');
    }
  });
});

function chunkSums(text: string, cuts: number[], trimEnd = false): number {
  let carry = '';
  let sum = 0;
  let from = 0;
  for (const to of [...cuts, text.length]) {
    const r = countWithCarry(carry + text.slice(from, to), to === text.length, trimEnd);
    sum += r.count;
    carry = r.carry;
    expect(carry.length).toBeLessThanOrEqual(MAX_SEGMENT);
    from = to;
  }
  return sum;
}

function randomCuts(length: number, pieces: number, seed: number): number[] {
  let x = seed;
  const cuts = new Set<number>();
  for (let i = 0; i < pieces; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    cuts.add(1 + (x % Math.max(1, length - 1)));
  }
  return [...cuts].sort((a, b) => a - b);
}

describe('countWithCarry', () => {
  const texts = [
    'tok '.repeat(3000),
    SAMPLES.join('\n').repeat(10),
    '日本語の文章には空白がありません。'.repeat(400), // forced cuts only
    ('word '.repeat(50) + 'y'.repeat(MAX_SEGMENT * 2 + 17) + ' ').repeat(3),
    '🙂'.repeat(MAX_SEGMENT + 3), // surrogate pairs at the forced cut
  ];
  it('sums to countText of the whole text however the text is cut', () => {
    for (const text of texts) {
      const whole = countText(text);
      for (const [pieces, seed] of [[1, 1], [7, 2], [50, 3], [400, 4]] as const) {
        expect(chunkSums(text, randomCuts(text.length, pieces, seed)), `${text.slice(0, 20)} / ${pieces}`).toBe(whole);
        expect(chunkSums(text + ' \n ', randomCuts(text.length, pieces, seed), true)).toBe(countText(text.trimEnd()));
      }
    }
  });
  it('carries only the last segment', () => {
    expect(countWithCarry('hello wor', false)).toEqual({ count: 1, carry: ' wor' });
    expect(countWithCarry('hello wor', true)).toEqual({ count: 2, carry: '' });
    expect(countWithCarry(' tok tok \n ', true, true)).toEqual({ count: 2, carry: '' });
  });
});
