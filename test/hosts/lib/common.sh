# shellcheck shell=bash
# testhost helpers: logging, errors, bounded waits, JSON, namespaces, per-host names and exec.
# Sourced by test/hosts/testhost; not executable on its own.
# shellcheck disable=SC2034 # the H_* variables are used by the other files

# ---------------------------------------------------------------------------------------------
# helpers

log() { printf 'testhost: %s\n' "$*" >&2; }
warn() { printf 'testhost: warning: %s\n' "$*" >&2; }
die() {
  printf 'testhost: error: %s\n' "$*" >&2
  exit 1
}
on_err() {
  local rc=$? line=$1 cmd=$2
  # Inside $(...) and ( ... ) the failure is the caller's to judge (errexit propagates it).
  ((BASH_SUBSHELL == 0)) || return 0
  printf 'testhost: error: command failed (exit %s, line %s): %s\n' "$rc" "$line" "$cmd" >&2
  if [[ -n ${H_NAME:-} ]]; then
    printf 'testhost: error: while working on %s; logs are in %s/log/ (libvirt: %s/log/libvirt/)\n' \
      "$H_NAME" "$H_DIR" "$H_DIR" >&2
  fi
  exit "$rc"
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR

now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# wait_until SECONDS CMD...: poll CMD (which must itself be bounded) every 0.2 s; 1 on timeout.
wait_until() {
  local limit=$1
  shift
  local deadline=$(($(date +%s%N) + limit * 1000000000))
  while :; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    (($(date +%s%N) < deadline)) || return 1
    sleep 0.2
  done
}

json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}

# write_atomic PATH MODE: stdin -> PATH, renamed into place so readers never see half a file.
write_atomic() {
  local tmp="$1.tmp.$$"
  cat >"$tmp"
  chmod "$2" "$tmp"
  mv -f "$tmp" "$1"
}

require_root() { [[ $EUID -eq 0 ]] || die "must run as root (it creates namespaces, veths and daemons)"; }

take_lock() {
  # The lock is held on this script file; every daemon we start gets fd 9 closed (9<&-).
  exec 9<"$SELF"
  flock -w 300 9 || die "another testhost run has held the lock on $SELF for 300 s"
}

# ns_ref PID KIND -> inode number of the process's namespace of KIND (empty if it is gone)
ns_ref() {
  local r
  r=$(readlink "/proc/$1/ns/$2" 2>/dev/null) || return 0
  echo "${r//[^0-9]/}"
}
# netns_ref NAME -> inode number of a named network namespace (empty if there is none)
netns_ref() { stat -L -c %i "/run/netns/$1" 2>/dev/null || true; }

# pid_from_file FILE COMM -> pid if the file names a live process whose comm is COMM
pid_from_file() {
  local f=$1 comm=$2 p
  [[ -r $f ]] || return 1
  p=$(tr -dc '0-9' <"$f")
  [[ -n $p && -d /proc/$p ]] || return 1
  [[ $(cat "/proc/$p/comm" 2>/dev/null) == "$comm" ]] || return 1
  echo "$p"
}

# ---------------------------------------------------------------------------------------------
# per-host naming

host_vars() {
  local i=$1
  if ! [[ $i =~ ^[0-9]+$ ]] || ((i < 1 || i > MAX_HOSTS)); then die "bad host index '$i' (1..$MAX_HOSTS)"; fi
  H_IDX=$i
  H_NAME="$NS_PREFIX$i"
  H_DIR="$STATE_ROOT/$H_NAME"
  H_DESC="$STATE_ROOT/$H_NAME.json"
  H_ADDR="$NET_PREFIX.$i.2"
  H_GW="$NET_PREFIX.$i.1"
  H_VETH_R="$H_NAME-r"
  H_VETH_N="$H_NAME-n"
  H_GUEST_PREFIX="192.168.$((100 + i))"
  H_ROUTED_PREFIX="$NET_PREFIX.$((100 + i))"
}

host_index_of() {
  # accepts "ep-h2" or "2"
  local a=$1
  a=${a#"$NS_PREFIX"}
  [[ $a =~ ^[0-9]+$ ]] || die "unknown host '$1' (expected ${NS_PREFIX}N or N)"
  echo "$a"
}

# holder_pid -> pid of this host's namespace holder (verified by its argv[0])
holder_pid() {
  local p
  p=$(tr -dc '0-9' <"$H_DIR/holder.pid" 2>/dev/null) || return 1
  [[ -n $p && -r /proc/$p/cmdline ]] || return 1
  [[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) == "ep-testhost-holder-$H_NAME:$STATE_ROOT "* ]] || return 1
  echo "$p"
}

# foreign_root: the state root of a live holder of this host's namespace that is not ours (the
# holder's argv[0] is ep-testhost-holder-NAME:STATE_ROOT); empty if there is none.
foreign_root() {
  local p a
  [[ -e /run/netns/$H_NAME ]] || return 0
  for p in $(ip netns pids "$H_NAME" 2>/dev/null); do
    a=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | head -1) || continue
    if [[ $a == "ep-testhost-holder-$H_NAME:"* && $a != "ep-testhost-holder-$H_NAME:$STATE_ROOT" ]]; then
      echo "${a#"ep-testhost-holder-$H_NAME:"}"
      return 0
    fi
  done
}

refuse_foreign() {
  local other
  other=$(foreign_root)
  [[ -z $other ]] || die "$H_NAME belongs to state root $other; use EP_TESTHOST_STATE=$other (e.g. to take it down)"
}

# hx CMD...: run CMD inside the host's mount + network namespaces with a clean environment.
hx() {
  local p
  p=$(holder_pid) || {
    echo "testhost: $H_NAME: namespace holder is not running" >&2
    return 1
  }
  (cd / && env -i PATH="$SAFE_PATH" HOME=/root LANG=C.UTF-8 TERM=dumb nsenter -t "$p" -m -n -- "$@" 9<&-)
}

hvirsh() { hx timeout -k 5 "${VIRSH_TIMEOUT:-30}" virsh -q -c qemu:///system "$@"; }

ssh_banner() {
  # shellcheck disable=SC2016 # $0 and $1 belong to the inner bash
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && head -c 7 <&3' "$1" "$2" 2>/dev/null | grep -q '^SSH-2.0'
}
