/**
 * The two parts of ssh2 this project calls, each loaded from its own file: the client and the key
 * parser. ssh2's package entry also loads its server, SFTP, agent, HTTP agents and key generation
 * (bcrypt-pbkdf, tweetnacl, node:http, node:https): start-up time for every process that dials,
 * for code none of ours uses. ssh2 has no `exports` map,
 * so these paths are public in practice; test/unit/ssh2-parts.test.ts fails if an ssh2 upgrade
 * moves them or if they stop being the very objects the package entry exports.
 */
import { createRequire } from 'node:module';
import type * as Ssh2 from 'ssh2';

const require = createRequire(import.meta.url);

/** `ssh2.Client`, from `ssh2/lib/client.js`. */
export const Client = require('ssh2/lib/client.js') as typeof Ssh2.Client;

/** `ssh2.utils.parseKey`, from `ssh2/lib/protocol/keyParser.js`. */
export const parseKey = (require('ssh2/lib/protocol/keyParser.js') as { parseKey: typeof Ssh2.utils.parseKey })
  .parseKey;
