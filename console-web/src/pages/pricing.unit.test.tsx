// @vitest-environment happy-dom
import { cleanup, fireEvent, render, screen, within } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defaultGroup, perMillion, type Pricing, PriceTable, PricingPage, priceRows } from './pricing';

// The API client keeps the fetch it found when its module loaded: this one answers as each test says.
const server = vi.hoisted(() => {
  const state = { calls: [] as string[], answer: (_path: string): Response => new Response('{}', { status: 404 }) };
  globalThis.fetch = (async (input: Request) => {
    const path = new URL(input.url).pathname;
    state.calls.push(path);
    return state.answer(path);
  }) as typeof fetch;
  return state;
});

afterEach(cleanup);

const model = (name: string, input: number | null, completion: number, cache: number, groups: string[]) => ({
  model_name: name, priced: input !== null, model_ratio: input === null ? null : input / 2,
  completion_ratio: input === null ? null : completion, cache_ratio: input === null ? null : cache,
  input_price: input, output_price: input === null ? null : input * completion, cache_read_price: input === null ? null : input * cache,
  enable_groups: groups,
});

const PRICING: Pricing = {
  group: 'default',
  group_ratio: { default: 1, vip: 0.5, idle: 2 },
  models: [
    model('claude-sonnet-4-5', 3, 5, 0.1, ['default', 'vip']),
    model('gpt-4o-mini', 0.15, 4, 0.5, ['default']),
    model('acme-unpriced-1', null, 0, 0, ['vip']),
  ],
};

/** The table's rows as cell texts, header first. */
const cells = () => within(screen.getByRole('table')).getAllByRole('row').map((r) => within(r).queryAllByRole(/cell|columnheader/).map((c) => c.textContent));

describe('perMillion', () => {
  it('shows cents for dollars and enough digits below one', () => {
    expect(perMillion(3)).toBe('$3.00');
    expect(perMillion(0.3)).toBe('$0.30');
    expect(perMillion(0.075)).toBe('$0.075');
    expect(perMillion(0.0025)).toBe('$0.0025');
    expect(perMillion(0)).toBe('$0.00');
    expect(perMillion(null)).toBe('not priced');
  });
});

describe('priceRows', () => {
  it("applies the chosen group's ratio and keeps the models that group serves", () => {
    expect(priceRows(PRICING, 'vip')).toEqual([
      { model: 'claude-sonnet-4-5', priced: true, input: 1.5, output: 7.5, cachedInput: 0.15, groups: ['default', 'vip'] },
      { model: 'acme-unpriced-1', priced: false, input: null, output: null, cachedInput: null, groups: ['vip'] },
    ]);
    expect(priceRows(PRICING, 'default', ' MINI ').map((r) => r.model)).toEqual(['gpt-4o-mini']);
  });

  it("starts at the account's own group, or the first serving one", () => {
    expect(defaultGroup(PRICING)).toBe('default');
    expect(defaultGroup({ ...PRICING, group: 'idle' })).toBe('default');
    expect(defaultGroup({ ...PRICING, models: [] })).toBe('');
  });
});

describe('PriceTable', () => {
  it("lists the own group's models at its ratio; another group reprices and flags what is not priced", () => {
    render(<PriceTable pricing={PRICING} />);
    expect(cells()).toEqual([
      ['Model', 'Input $/M', 'Output $/M', 'Cached input $/M', 'Groups'],
      ['claude-sonnet-4-5', '$3.00', '$15.00', '$0.30', 'default, vip'],
      ['gpt-4o-mini', '$0.15', '$0.60', '$0.075', 'default'],
    ]);
    // A group serving nothing is not offered.
    const group = screen.getByLabelText('Group');
    expect(within(group).getAllByRole('option').map((o) => o.getAttribute('value'))).toEqual(['default', 'vip']);
    fireEvent.change(group, { target: { value: 'vip' } });
    expect(cells().slice(1)).toEqual([
      ['claude-sonnet-4-5', '$1.50', '$7.50', '$0.15', 'default, vip'],
      ['acme-unpriced-1', 'not priced', 'not priced', 'not priced', 'vip'],
    ]);
    fireEvent.input(screen.getByLabelText('Search models'), { target: { value: 'acme' } });
    expect(cells().slice(1).map((r) => r[0])).toEqual(['acme-unpriced-1']);
  });

  it('says so when the account can use no model', () => {
    render(<PriceTable pricing={{ ...PRICING, models: [] }} />);
    expect(screen.getByText('No model is available to this account yet.')).toBeTruthy();
    expect(screen.queryByRole('table')).toBeNull();
  });
});

describe('PricingPage', () => {
  it('reads GET /api/pricing and shows its error in place', async () => {
    server.answer = () => new Response(JSON.stringify({ success: false, message: 'the database is away' }), { status: 500, headers: { 'content-type': 'application/json' } });
    render(<PricingPage account={{} as Parameters<typeof PricingPage>[0]['account']} refreshAccount={() => {}} />);
    expect((await screen.findByRole('alert')).textContent).toBe('the database is away');
    expect(server.calls).toEqual(['/api/pricing']);
  });

  it('shows the answer as the table', async () => {
    server.answer = () => new Response(JSON.stringify({ success: true, message: '', data: PRICING }), { headers: { 'content-type': 'application/json' } });
    render(<PricingPage account={{} as Parameters<typeof PricingPage>[0]['account']} refreshAccount={() => {}} />);
    await screen.findByRole('table');
    expect(cells()[1]).toEqual(['claude-sonnet-4-5', '$3.00', '$15.00', '$0.30', 'default, vip']);
  });
});
