/**
 * ssh2 silently falls back to pure-JS crypto when its native addon does not load (for instance
 * when it was built against another Node's headers), which halves SSH throughput. Fail loudly.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { it } from 'node:test';

it("ssh2's native crypto addon loads in this Node", () => {
  const require = createRequire(import.meta.url);
  const binding = require('ssh2/lib/protocol/crypto/build/Release/sshcrypto.node') as Record<string, unknown>;
  assert.equal(typeof binding.AESGCMCipher, 'function', 'AES-GCM from the native addon');
  assert.equal(typeof binding.ChaChaPolyCipher, 'function', 'ChaCha20-Poly1305 from the native addon');
});
