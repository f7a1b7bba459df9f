// @vitest-environment happy-dom
// The chart's y axes are as wide as their labels, so that the axis title beside them never overlaps them.
import { describe, expect, it, vi } from 'vitest';

// uPlot reads matchMedia when it loads; these tests need only the chart's own functions.
vi.stubGlobal('matchMedia', () => ({ matches: false, addEventListener() {}, removeEventListener() {}, addListener() {}, removeListener() {} }));
const { axisWidth, spendTickLabels, stepDecimals } = await import('./usage-chart');

describe('usage chart axes', () => {
  it('labels spend ticks with the decimals of the step', () => {
    expect(stepDecimals(1)).toBe(0);
    expect(stepDecimals(0.25)).toBe(2);
    expect(stepDecimals(0.0005)).toBe(4);
    expect(stepDecimals(0.1 + 0.2 - 0.3 + 0.0001)).toBe(4);
    expect(spendTickLabels([0, 0.0005, 0.001, 0.0015000000000000002], 0.0005)).toEqual(['$0.0000', '$0.0005', '$0.0010', '$0.0015']);
    expect(spendTickLabels([0, 10, 20], 10)).toEqual(['$0', '$10', '$20']);
  });

  it('makes an axis as wide as its longest label, its ticks and the gap', () => {
    const sevenPxPerChar = (t: string) => t.length * 7;
    // "$0.0025" is 49 px wide: uPlot's fixed 50 px held it only with no room for ticks and gap.
    expect(axisWidth(['$0.0000', '$0.0025'], sevenPxPerChar, 10, 5)).toBe(10 + 5 + 49 + 4);
    expect(axisWidth(['$0', '$1'], sevenPxPerChar, 10, 5)).toBe(33);
    expect(axisWidth([], sevenPxPerChar, 10, 5)).toBe(19);
  });
});
