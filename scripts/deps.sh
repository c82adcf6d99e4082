# Sourced after scripts/env.sh: installs the npm packages from package-lock.json when
# node_modules is missing or older than the lock file. Idempotent and quiet when up to date.
ep_npm_deps() {
  local stamp="$EP_ROOT/node_modules/.ep-installed"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$EP_ROOT/package-lock.json" ] && [ "$stamp" -nt "$EP_ROOT/package.json" ]; then
    return 0
  fi
  echo "deps: npm ci" >&2
  (cd "$EP_ROOT" && npm ci --no-audit --no-fund --loglevel=error) || return 1
  # ssh2 falls back to slow pure-JS crypto when its addon does not load: say so loudly.
  (cd "$EP_ROOT" && node -e "require('ssh2/lib/protocol/crypto/build/Release/sshcrypto.node')") 2>/dev/null ||
    echo "deps: warning: ssh2's native crypto did not build for $(node --version); SSH transfers will be slow" >&2
  touch "$stamp"
}
