// Registers the project's custom search attributes (contracts/search-attributes.ts) on a namespace:
// the worker does it at start-up before it polls, tests where no worker runs, and an operator
// step may. Idempotent (only missing ones are added) and bounded (every call has a deadline).
import type { Connection } from '@temporalio/client';
import { CUSTOM_SEARCH_ATTRIBUTES } from '../contracts/search-attributes.ts';
import type { SearchAttributeKind } from '../contracts/search-attributes.ts';
import { DEFAULT_CALL_TIMEOUT_MS, withDeadline } from './connection.ts';

/** The server's numbers of the search attribute kinds (`temporal.api.enums.v1.IndexedValueType`). */
export const INDEXED_VALUE_TYPES: Readonly<Record<SearchAttributeKind, number>> = {
  Text: 1,
  Keyword: 2,
  Int: 3,
  Double: 4,
  Bool: 5,
  Datetime: 6,
  KeywordList: 7,
};

/** The kind the server's number stands for, as contracts/search-attributes.ts spells it. */
export function kindName(type: number): string {
  const found = Object.entries(INDEXED_VALUE_TYPES).find(([, n]) => n === type);
  return found ? found[0] : `unknown(${type})`;
}

type OperatorConnection = Pick<Connection, 'operatorService' | 'withDeadline'>;

/** The namespace's custom search attributes as `{ name: kind }`. */
export async function registeredSearchAttributes(
  connection: OperatorConnection,
  namespace: string,
  timeoutMs = DEFAULT_CALL_TIMEOUT_MS,
): Promise<Record<string, string>> {
  const res = await withDeadline(connection, 'the search attribute list', timeoutMs, () =>
    connection.operatorService.listSearchAttributes({ namespace }),
  );
  const out: Record<string, string> = {};
  for (const [name, type] of Object.entries(res.customAttributes ?? {})) out[name] = kindName(type);
  return out;
}

/** A search attribute is registered with another kind: only a new namespace (or database) fixes it. */
export class SearchAttributeKindError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SearchAttributeKindError';
  }
}

/** gRPC ALREADY_EXISTS: another process added the same attribute first. */
const ALREADY_EXISTS = 6;
/** Reads after an add before giving up on seeing it listed (visibility may lag a little). */
const LIST_ATTEMPTS = 10;
const LIST_PAUSE_MS = 200;

/**
 * Adds to `namespace` every search attribute of contracts/search-attributes.ts it lacks and
 * returns their names (none when all were there). Fails naming the attribute when one is
 * registered with another kind.
 */
export async function ensureSearchAttributes(
  connection: OperatorConnection,
  namespace: string,
  o: { callTimeoutMs?: number } = {},
): Promise<string[]> {
  const timeoutMs = o.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const missing = (have: Record<string, string>): string[] => {
    const out: string[] = [];
    for (const [name, kind] of Object.entries(CUSTOM_SEARCH_ATTRIBUTES)) {
      if (have[name] === undefined) out.push(name);
      else if (have[name] !== kind) {
        throw new SearchAttributeKindError(
          `search attribute ${name} is registered on namespace ${namespace} as ${have[name]}, not ${kind}; ` +
            'a kind cannot change: use a new namespace (the dev server: scripts/temporal down && rm -rf .data/temporal)',
        );
      }
    }
    return out;
  };
  const absent = missing(await registeredSearchAttributes(connection, namespace, timeoutMs));
  if (absent.length === 0) return [];
  const searchAttributes = Object.fromEntries(
    absent.map((name) => [
      name,
      INDEXED_VALUE_TYPES[CUSTOM_SEARCH_ATTRIBUTES[name as keyof typeof CUSTOM_SEARCH_ATTRIBUTES]],
    ]),
  );
  try {
    await withDeadline(connection, 'the search attribute registration', timeoutMs, () =>
      connection.operatorService.addSearchAttributes({ namespace, searchAttributes }),
    );
  } catch (err) {
    if ((err as { code?: unknown }).code !== ALREADY_EXISTS) throw err;
  }
  for (let attempt = 1; ; attempt++) {
    const still = missing(await registeredSearchAttributes(connection, namespace, timeoutMs));
    if (still.length === 0) return absent;
    if (attempt >= LIST_ATTEMPTS) {
      throw new Error(`search attributes ${still.join(', ')} were added to ${namespace} but are not listed`);
    }
    await new Promise((resolve) => setTimeout(resolve, LIST_PAUSE_MS));
  }
}
