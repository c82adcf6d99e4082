// The paging of the list routes (proxies, pools): a request's pageToken back to the server's
// token (a 422 naming pageToken when this API did not issue it for these filters), and a page as
// the answer, its next token signed for the same filters.
import { ApiError } from './errors.ts';
import type { PageTokens } from './page-token.ts';

/** The server's token of `text` for `query`; undefined for the first page; 422 when not ours. */
export function serverToken(tokens: PageTokens, query: string, text: string | undefined): Uint8Array | undefined {
  if (text === undefined) return undefined;
  const token = tokens.decode(query, text);
  if (token === undefined) {
    throw new ApiError(
      'INVALID_PAGE_TOKEN',
      'query field pageToken was not issued by this API for these filters; repeat the filters of the first page, or start over without it',
      'pageToken',
    );
  }
  return token;
}

/** `{ [key]: items, nextPageToken? }`: the answer of one page. */
export function pageAnswer<K extends string, T>(
  key: K,
  tokens: PageTokens,
  query: string,
  page: { items: T[]; nextPageToken?: Uint8Array },
): Record<K, T[]> & { nextPageToken?: string } {
  const out = { [key]: page.items } as Record<K, T[]> & { nextPageToken?: string };
  if (page.nextPageToken !== undefined) out.nextPageToken = tokens.encode(query, page.nextPageToken);
  return out;
}
