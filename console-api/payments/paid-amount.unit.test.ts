import { describe, expect, it } from 'vitest';
import { centsOfDecimal, centsOfMinorUnits } from './paid-amount.js';

describe('centsOfDecimal', () => {
  it('reads a plain decimal exactly, trailing zeros past the cent allowed', () => {
    expect(['7.30', '7.3', '7.300', '7.30000000'].map(centsOfDecimal)).toEqual([730n, 730n, 730n, 730n]);
    expect(centsOfDecimal('0')).toBe(0n);
    expect(centsOfDecimal('999999999999.99')).toBe(99999999999999n);
    expect(centsOfDecimal('07.05')).toBe(705n);
  });

  it('is null for anything else: fractions of a cent, signs, exponents, spaces, hex, empty, not a string', () => {
    for (const text of ['7.295', '7.305', '7.2950000001', '7.3049999', '7.3000001', '7.304', '7.3e0', ' 7.30', '7.30 ', '0x7', '+7.30', '-7.30',
      '7.', '.30', '', '7,30', 'Infinity', 'NaN', '1'.repeat(16), '7.3\u0000', '٧.٣٠']) {
      expect(centsOfDecimal(text), JSON.stringify(text)).toBeNull();
    }
    for (const v of [7.3, 730, null, undefined, ['7.30'], { toString: () => '7.30' }]) expect(centsOfDecimal(v)).toBeNull();
  });
});

describe('centsOfMinorUnits', () => {
  it('converts whole minor units of 2-, 0- and 3-decimal currencies', () => {
    expect(centsOfMinorUnits(1000, 100)).toBe(1000n);
    expect(centsOfMinorUnits(0, 100)).toBe(0n);
    expect(centsOfMinorUnits(500, 1)).toBe(50000n);
    expect(centsOfMinorUnits(7300, 1000)).toBe(730n);
    expect(centsOfMinorUnits(Number.MAX_SAFE_INTEGER, 100)).toBe(BigInt(Number.MAX_SAFE_INTEGER));
  });

  it('is null for a fraction, a string, a negative, an unsafe integer, or a fraction of a cent', () => {
    for (const v of [100.4, 99.6, '100', -100, Number.MAX_SAFE_INTEGER + 1, Infinity, NaN, null, undefined, true]) {
      expect(centsOfMinorUnits(v, 100), String(v)).toBeNull();
    }
    expect(centsOfMinorUnits(7305, 1000)).toBeNull();
  });
});
