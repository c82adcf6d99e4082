# Sourced by the bin/ launchers when run from a shell: sets EP_NODE to a Node.js 22 or newer. The
# project's own Node (.local/node, which scripts/main and scripts/test install where the machine's
# is older) comes first, else `node` on PATH; with neither, it names the fix in one line and exits 1.
ep_root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
EP_NODE=$ep_root/.local/node/bin/node
if [ ! -x "$EP_NODE" ]; then
  EP_NODE=$(command -v node || true)
  ep_version=
  [ -n "$EP_NODE" ] && ep_version=$("$EP_NODE" --version 2>/dev/null)
  ep_major=${ep_version#v}
  ep_major=${ep_major%%.*}
  case $ep_major in '' | *[!0-9]*) ep_major=0 ;; esac
  if [ "$ep_major" -lt 22 ]; then
    echo "$(basename "$0"): needs Node.js 22 or newer and found ${ep_version:-no node}${EP_NODE:+ at $EP_NODE}: run scripts/main or scripts/test once (they install Node 24 into $ep_root/.local/node), or put Node 22+ first on PATH" >&2
    exit 1
  fi
fi
