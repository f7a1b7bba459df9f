// @vitest-environment happy-dom
// The top-up page's minimums: each QR-code method's own (pay_methods[].min_topup, a string in the
// contract), shown in the hint and held to before the provider's page, as the API holds to them.
import { describe, expect, it } from 'vitest';
import { methodMinimum, minimumHint } from './topup';

const info = {
  min_topup: 1, cardpay_min_topup: 5,
  pay_methods: [
    { name: 'Alipay', type: 'alipay', color: 'blue', min_topup: '50' },
    { name: 'WeChat', type: 'wxpay', color: 'green', min_topup: '1' },
  ],
};

describe('top-up minimums', () => {
  it('a method\'s own minimum when above MinTopUp, else MinTopUp', () => {
    expect(methodMinimum(info, info.pay_methods[0]!)).toBe(50);
    expect(methodMinimum(info, info.pay_methods[1]!)).toBe(1);
    expect(methodMinimum(info, { min_topup: '' })).toBe(1);
    expect(methodMinimum(info, { min_topup: 'x' })).toBe(1);
    expect(methodMinimum({ min_topup: 10 }, { min_topup: '2' })).toBe(10);
  });

  it('the hint names every minimum the buttons hold to', () => {
    expect(minimumHint(info, true, true)).toBe('$1 of credit is 500,000 quota; minimum $1, with Alipay $50, by card $5');
    expect(minimumHint(info, true, false)).toBe('$1 of credit is 500,000 quota; minimum $1, with Alipay $50');
    expect(minimumHint(info, false, true)).toBe('$1 of credit is 500,000 quota; minimum $1, by card $5');
  });
});
