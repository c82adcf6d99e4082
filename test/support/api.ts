/**
 * The HTTP API for integration tests: a token file, the real Temporal stores, and the server on
 * 127.0.0.1 on a free port; plus a small fetch helper.
 */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { loadTokenFile } from '../../api/auth.ts';
import { buildApi } from '../../api/server.ts';
import { temporalWarmer } from '../../client/warm.ts';
import { temporalStore } from '../../client/store.ts';
import { temporalPoolStore } from '../../client/pools.ts';
import { temporalHostStore } from '../../client/host-store.ts';
import type { SurveyRead } from '../../client/host-store.ts';
import type { ProxyStore } from '../../client/store.ts';
import { createLogger, logLevelFromEnv } from '../../lib/log/logger.ts';

export interface TestTokens {
  file: string;
  admin: string;
  reader: string;
}

/** Writes a token file with one admin and one read-only token. */
export async function writeTokens(dir: string): Promise<TestTokens> {
  const admin = randomBytes(24).toString('hex');
  const reader = randomBytes(24).toString('hex');
  const file = join(dir, 'tokens');
  await writeFile(file, `# test tokens\n${admin} admin\n${reader} read\n`, { mode: 0o600 });
  return { file, admin, reader };
}

export interface TestApi {
  app: FastifyInstance;
  url: string;
  store: ProxyStore;
  /** Calls of store.start (a workflow start was attempted). */
  starts: () => number;
  /** Starts that started a workflow (not an existing one found). */
  created: () => number;
  close(): Promise<void>;
}

/** Starts the API over `client` on `taskQueue`, listening on 127.0.0.1:0. */
export async function startTestApi(
  client: Client,
  taskQueue: string,
  tokens: TestTokens,
  callTimeoutMs = 5_000,
  /** Runs on the app before it listens (hooks a test counts answers with). */
  beforeListen?: (app: FastifyInstance) => void,
  o: {
    /**
     * The survey /v1/hosts knows hosts from. Default: none (the provider-health schedule is the
     * namespace's, shared by every test run: its hosts are other runs'), so only host workflows
     * on `taskQueue` are known.
     */
    survey?: () => Promise<SurveyRead | undefined>;
  } = {},
): Promise<TestApi> {
  const real = temporalStore(client, { callTimeoutMs });
  let starts = 0;
  let created = 0;
  const store: ProxyStore = {
    ...real,
    start: async (spec, tq) => {
      starts++;
      const result = await real.start(spec, tq);
      if (result.started) created++;
      return result;
    },
  };
  const app = await buildApi({
    store,
    pools: temporalPoolStore(client, { callTimeoutMs }),
    hosts: temporalHostStore(client, {
      callTimeoutMs,
      taskQueue,
      survey: o.survey ?? (() => Promise.resolve(undefined)),
    }),
    warmer: temporalWarmer(client),
    log: createLogger({ name: 'api-test', stream: 'stderr', level: logLevelFromEnv(process.env, 'warn') }),
    auth: await loadTokenFile(tokens.file),
    taskQueue,
  });
  beforeListen?.(app);
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url, store, starts: () => starts, created: () => created, close: () => app.close() };
}

export interface Reply {
  status: number;
  body: Record<string, unknown>;
  text: string;
}

/** One request; the token is sent as a bearer token unless null. */
export async function http(
  base: string,
  method: string,
  path: string,
  o: { token?: string | null; body?: unknown; raw?: string; type?: string; timeoutMs?: number } = {},
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (o.token) headers['authorization'] = `Bearer ${o.token}`;
  let body: string | undefined;
  if (o.raw !== undefined) body = o.raw;
  else if (o.body !== undefined) body = JSON.stringify(o.body);
  if (body !== undefined) headers['content-type'] = o.type ?? 'application/json';
  const res = await fetch(new URL(path, base), {
    method,
    headers,
    body,
    signal: AbortSignal.timeout(o.timeoutMs ?? 30_000),
  });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Prometheus text, or an empty body.
  }
  return { status: res.status, body: parsed, text };
}

/** The `error` member of an error reply. */
export function apiError(r: Reply): { code: string; message: string; field?: string } {
  return r.body['error'] as { code: string; message: string; field?: string };
}
