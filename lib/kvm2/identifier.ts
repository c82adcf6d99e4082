/**
 * The identifier rule (lib/rules.ts) as the provider applies it to the names it builds libvirt
 * names from: a provider entry, an image key, a proxy name.
 */
import { IDENTIFIER_RULE, isIdentifier } from '../rules.ts';
import { Kvm2NameError } from './errors.ts';

/** Returns `value` if it is an identifier; throws Kvm2NameError naming `field` and the rule otherwise. */
export function checkIdentifier(field: string, value: unknown): string {
  if (!isIdentifier(value)) throw new Kvm2NameError(field, `${IDENTIFIER_RULE}, got ${JSON.stringify(value)}`);
  return value;
}
