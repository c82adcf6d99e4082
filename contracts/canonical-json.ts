// The one text of a JSON value for comparing two of them: the API's same-spec checks (a proxy's, a
// pool's), the catalog's digest and the pool workflow's new-revision test all use it, so what one
// calls the same template the others do too. Pure; no imports, so workflows import it alike.

/** JSON with object keys sorted at every level and undefined members left out. */
export function canonicalJson(value: unknown): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (typeof v === 'object' && v !== null) {
      return Object.fromEntries(
        Object.keys(v)
          .sort()
          .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
          .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return JSON.stringify(sort(value)) ?? 'undefined';
}
