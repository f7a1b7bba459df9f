// The group policy's rule of which groups an account may use (review finding 3): unset
// UserUsableGroups means new-api's default, the account's own group plus default and vip where
// GroupRatio prices them; a set option lists the groups besides the account's own.
import { describe, expect, it } from 'vitest';
import { ratiosFromOptions } from '../pricing/ratios.js';
import { describeUsableGroups, groupPolicyFromOptions, usableGroupNames } from './group-policy.js';

const options = (o: Record<string, unknown>) =>
  new Map(Object.entries(o).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)] as [string, string]));
const PARTNER = { GroupRatio: { default: 1, vip: 1, svip: 1, partner: 0.5 } };

describe('UserUsableGroups unset', () => {
  it('gives an account its own group plus default and vip, never svip or another priced group', () => {
    const o = options(PARTNER);
    const ratios = ratiosFromOptions(o);
    expect(usableGroupNames(o, ratios, 'default')).toEqual(['default', 'vip']);
    expect(usableGroupNames(o, ratios, 'partner')).toEqual(['partner', 'default', 'vip']);
    expect(usableGroupNames(o, ratios, 'svip')).toEqual(['svip', 'default', 'vip']);
    const policy = groupPolicyFromOptions(o, ratios);
    expect(policy.routeGroups('svip', 'default')).toBeNull();
    expect(policy.routeGroups('partner', 'default')).toBeNull();
    expect(policy.routeGroups('partner', 'vip')).toBeNull();
    expect(policy.routeGroups('partner', 'partner')).toEqual(['partner']);
    expect(policy.routeGroups('', 'partner')).toEqual(['partner']);
    expect(policy.routeGroups('vip', 'default')).toEqual(['vip']);
    expect(policy.routeGroups('default', 'partner')).toEqual(['default']);
  });

  it('offers vip only where GroupRatio prices it, and an unpriced own group not at all', () => {
    const o = options({ GroupRatio: { default: 1, partner: 0.5 } });
    const ratios = ratiosFromOptions(o);
    expect(usableGroupNames(o, ratios, 'default')).toEqual(['default']);
    expect(usableGroupNames(o, ratios, 'gone')).toEqual(['default']);
    expect(groupPolicyFromOptions(o, ratios).routeGroups('vip', 'default')).toBeNull();
    expect(describeUsableGroups(o, 'partner')).toEqual({ partner: { ratio: 0.5, desc: 'partner' }, default: { ratio: 1, desc: 'default' } });
  });

  it('routes auto only through the AutoGroups the account may use', () => {
    const o = options({ ...PARTNER, AutoGroups: ['partner', 'svip', 'vip', 'default'] });
    const policy = groupPolicyFromOptions(o, ratiosFromOptions(o));
    expect(policy.routeGroups('auto', 'default')).toEqual(['vip', 'default']);
    expect(policy.routeGroups('auto', 'partner')).toEqual(['partner', 'vip', 'default']);
  });
});

describe('UserUsableGroups set', () => {
  it('keeps its meaning: the account\'s own group plus the groups it lists, whatever they are', () => {
    const o = options({ ...PARTNER, UserUsableGroups: { svip: 'Premium' } });
    const ratios = ratiosFromOptions(o);
    expect(usableGroupNames(o, ratios, 'default')).toEqual(['default', 'svip']);
    expect(describeUsableGroups(o, 'partner')).toEqual({ partner: { ratio: 0.5, desc: 'partner' }, svip: { ratio: 1, desc: 'Premium' } });
    const policy = groupPolicyFromOptions(o, ratios);
    expect(policy.routeGroups('svip', 'default')).toEqual(['svip']);
    expect(policy.routeGroups('vip', 'default')).toBeNull();
    expect(policy.routeGroups('default', 'partner')).toBeNull();
    // {} lists nothing: the account's own group only.
    const none = options({ ...PARTNER, UserUsableGroups: {} });
    expect(usableGroupNames(none, ratiosFromOptions(none), 'partner')).toEqual(['partner']);
  });
});
