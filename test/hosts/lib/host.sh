# shellcheck shell=bash
# testhost host lifecycle: health check, bring-up, teardown, discovery.
# Sourced by test/hosts/testhost; not executable on its own.

# ---------------------------------------------------------------------------------------------
# host lifecycle

host_exists_any() {
  [[ -e /run/netns/$H_NAME || -d $H_DIR || -e $H_DESC ]] && return 0
  ip link show "$H_VETH_R" >/dev/null 2>&1
}

# host_health: 0 if every part of the host is up; otherwise H_PROBLEM says what is not.
host_health() {
  H_PROBLEM=''
  local hp
  [[ -e /run/netns/$H_NAME ]] || { H_PROBLEM="network namespace $H_NAME missing"; return 1; }
  hp=$(holder_pid) || { H_PROBLEM="namespace holder not running"; return 1; }
  [[ $(ns_ref "$hp" net) == "$(netns_ref "$H_NAME")" ]] || { H_PROBLEM="holder $hp is not in netns $H_NAME"; return 1; }
  ip -4 -o addr show dev "$H_VETH_R" 2>/dev/null | grep -q " $H_GW/24 " || { H_PROBLEM="veth $H_VETH_R without $H_GW/24"; return 1; }
  pid_from_file "$H_DIR/run/libvirt/virtlogd.pid" virtlogd >/dev/null || { H_PROBLEM="virtlogd not running"; return 1; }
  pid_from_file "$H_DIR/run/libvirt/libvirtd.pid" libvirtd >/dev/null || { H_PROBLEM="libvirtd not running"; return 1; }
  pid_from_file "$H_DIR/ssh/sshd.pid" sshd >/dev/null || { H_PROBLEM="sshd not running"; return 1; }
  [[ -S $H_DIR/run/libvirt/libvirt-sock ]] || { H_PROBLEM="no libvirt socket"; return 1; }
  VIRSH_TIMEOUT=10 hvirsh version >/dev/null 2>&1 || { H_PROBLEM="virsh version inside the namespace failed"; return 1; }
  [[ $(VIRSH_TIMEOUT=10 hvirsh pool-info "$POOL_NAME" 2>/dev/null | awk '$1=="State:"{print $2}') == running ]] ||
    { H_PROBLEM="pool $POOL_NAME not running"; return 1; }
  [[ $(VIRSH_TIMEOUT=10 hvirsh net-info "$NET_NAME" 2>/dev/null | awk '$1=="Active:"{print $2}') == yes ]] ||
    { H_PROBLEM="network $NET_NAME not active"; return 1; }
  ssh_banner "$H_ADDR" "$SSH_PORT" || { H_PROBLEM="sshd on $H_ADDR:$SSH_PORT does not answer"; return 1; }
  [[ -f $H_DIR/ssh/ssh_host_ed25519_key.pub && -f $H_DIR/created-at ]] || { H_PROBLEM="state files missing"; return 1; }
  cmp -s "$H_DIR/ssh/authorized_keys" "$STATE_ROOT/id_ed25519.pub" || { H_PROBLEM="client key changed"; return 1; }
  return 0
}

check_subnet_free() {
  local other
  other=$(ip -4 -o addr show 2>/dev/null | awk -v v="$H_VETH_R" -v p="$NET_PREFIX.$H_IDX." \
    '$2 != v && index($4, p) == 1 {print $2 " " $4}' | head -1)
  [[ -z $other ]] || die "$NET_PREFIX.$H_IDX.0/24 is already used on this machine ($other); set EP_TESTHOST_NET"
  # a route as specific as our /24 (or more) would take the traffic away from the namespace
  other=$(ip -4 route show to match "$H_ADDR" 2>/dev/null | awk -v v="$H_VETH_R" \
    '$1 != "default" && index($0, "dev " v " ") == 0 { n = split($1, a, "/"); if (n == 1 || a[2] + 0 >= 24) print }' | head -1)
  [[ -z $other ]] || die "a route already covers $H_ADDR ($other); set EP_TESTHOST_NET to another prefix"
}

start_holder() {
  local script
  # shellcheck disable=SC2016 # expanded by the holder's bash
  script='set -e
S=$1 N=$2 R=$3
mount --bind "$S/etc/libvirt" /etc/libvirt
mount --bind "$S/run/libvirt" /run/libvirt
mount --bind "$S/lib/libvirt" /var/lib/libvirt
mkdir -p "$S/log/libvirt/qemu"   # as the Debian package ships it: domains log their consoles there
mount --bind "$S/log/libvirt" /var/log/libvirt
mount --bind "$S/cache/libvirt" /var/cache/libvirt
mount --bind "$S/home/root" /root
cd /
echo "$$" >"$S/holder.pid.tmp"
mv -f "$S/holder.pid.tmp" "$S/holder.pid"
exec -a "ep-testhost-holder-$N:$R" sleep infinity'
  rm -f "$H_DIR/holder.pid"
  setsid ip netns exec "$H_NAME" unshare --mount --propagation private -- /bin/bash -c "$script" holder \
    "$H_DIR" "$H_NAME" "$STATE_ROOT" </dev/null >>"$H_DIR/log/holder.log" 2>&1 9<&- &
  wait_until 10 holder_pid ||
    die "$H_NAME: namespace holder did not come up within 10 s; see $H_DIR/log/holder.log"
  local hp
  hp=$(holder_pid)
  [[ $(ns_ref "$hp" net) == "$(netns_ref "$H_NAME")" ]] || die "$H_NAME: holder $hp is not in netns $H_NAME"
  [[ $(ns_ref "$hp" mnt) != "$(ns_ref 1 mnt)" ]] || die "$H_NAME: holder $hp shares the root mount namespace"
  printf 'NETNS=%s\nMNTNS=%s\nHOLDER=%s\n' "$(ns_ref "$hp" net)" "$(ns_ref "$hp" mnt)" "$hp" >"$H_DIR/ns.env"
}

# host_routes: a route inside the namespace to every test host's root-side address (idempotent).
# Guests of any host then reach a service on any root-side address (a health target, an image
# mirror), as they reach their own host's: the root namespace delivers traffic to its own addresses
# locally, and the FORWARD drop rules still keep the namespaces apart.
host_routes() {
  ip -n "$H_NAME" route replace "$NET_PREFIX.0.0/16" via "$H_GW" dev "$H_VETH_N" ||
    die "$H_NAME: could not add the route to $NET_PREFIX.0.0/16 via $H_GW"
}

# routed_route_dev: the interface the machine's kernel picks for the routed network's gateway
# (`ip route get`; it sends nothing); fails unless that is this host's veth.
routed_route_dev() {
  local dev
  dev=$(ip -4 -o route get "$H_ROUTED_PREFIX.1" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  [[ $dev == "$H_VETH_R" ]] || return 1
  echo "$dev"
}

# routed_health: 0 if the routed network is active and the machine routes it into the veth.
routed_health() {
  H_PROBLEM=''
  [[ $(VIRSH_TIMEOUT=10 hvirsh net-info "$ROUTED_NET_NAME" 2>/dev/null | awk '$1=="Active:"{print $2}') == yes ]] ||
    { H_PROBLEM="routed network $ROUTED_NET_NAME not active (testhost up adds it)"; return 1; }
  routed_route_dev >/dev/null ||
    { H_PROBLEM="no route from the machine to $H_ROUTED_PREFIX.0/24 via $H_VETH_R (testhost up adds it)"; return 1; }
}

# host_routed: the routed network (defined, started, autostarted) and the machine's route to it
# through the veth. Idempotent and additive: on a host that is already up it adds only what is
# missing and never touches the NAT network or running guests.
host_routed() {
  local other
  other=$(ip -4 -o addr show 2>/dev/null | awk -v p="$H_ROUTED_PREFIX." 'index($4, p) == 1 {print $2 " " $4}' | head -1)
  [[ -z $other ]] || die "$H_ROUTED_PREFIX.0/24 is already used on this machine ($other); set EP_TESTHOST_NET"
  other=$(ip -4 route show "$H_ROUTED_PREFIX.0/24" 2>/dev/null | grep -v " dev $H_VETH_R" | head -1 || true)
  [[ -z $other ]] || die "a route for $H_ROUTED_PREFIX.0/24 exists already ($other); set EP_TESTHOST_NET"
  if ! VIRSH_TIMEOUT=10 hvirsh net-info "$ROUTED_NET_NAME" >/dev/null 2>&1; then
    write_routed_net_xml
    hvirsh net-define "$H_DIR/net-$ROUTED_NET_NAME.xml" >/dev/null
    log "$H_NAME: defined the routed network $ROUTED_NET_NAME ($H_ROUTED_PREFIX.0/24 on $ROUTED_BRIDGE_NAME)"
  fi
  if [[ $(VIRSH_TIMEOUT=10 hvirsh net-info "$ROUTED_NET_NAME" 2>/dev/null | awk '$1=="Active:"{print $2}') != yes ]]; then
    hvirsh net-start "$ROUTED_NET_NAME" >/dev/null ||
      die "$H_NAME: network $ROUTED_NET_NAME did not start; see $H_DIR/log/libvirt/libvirtd.log"
  fi
  hvirsh net-autostart "$ROUTED_NET_NAME" >/dev/null
  ip route replace "$H_ROUTED_PREFIX.0/24" via "$H_ADDR" dev "$H_VETH_R" ||
    die "$H_NAME: could not add the route to $H_ROUTED_PREFIX.0/24 via $H_ADDR dev $H_VETH_R"
  routed_health || die "$H_NAME: $H_PROBLEM"
}

host_up() {
  local t0 hp
  if host_health; then
    check_domain_type
    host_routes
    host_routed
    log "$H_NAME: already up and healthy ($H_ADDR:$SSH_PORT)"
    return 0
  fi
  t0=$(now_ms)
  refuse_foreign
  if host_exists_any; then
    log "$H_NAME: not healthy ($H_PROBLEM); tearing down its leftovers before rebuilding"
    host_down
  fi
  log "$H_NAME: creating (namespace $H_NAME, $H_ADDR, guests on $H_GUEST_PREFIX.0/24)"
  check_subnet_free
  write_host_configs

  # network namespace + veth pair; no default route inside, so nothing leaves but to the root side
  ip netns add "$H_NAME"
  ip link add "$H_VETH_R" type veth peer name "$H_VETH_N" netns "$H_NAME"
  ip addr add "$H_GW/24" dev "$H_VETH_R"
  ip link set "$H_VETH_R" up
  ip -n "$H_NAME" link set lo up
  ip -n "$H_NAME" addr add "$H_ADDR/24" dev "$H_VETH_N"
  ip -n "$H_NAME" link set "$H_VETH_N" up
  host_routes

  start_holder
  hp=$(holder_pid)

  # virtlogd, then libvirtd, each with its own pid file under the host's /run/libvirt
  hx virtlogd -d -p /run/libvirt/virtlogd.pid </dev/null >>"$H_DIR/log/virtlogd.stderr" 2>&1 ||
    die "$H_NAME: virtlogd failed to start; see $H_DIR/log/virtlogd.stderr and $H_DIR/log/libvirt/virtlogd.log"
  wait_until 10 test -S "$H_DIR/run/libvirt/virtlogd-sock" ||
    die "$H_NAME: virtlogd socket did not appear within 10 s; see $H_DIR/log/libvirt/virtlogd.log"
  # libvirtd probes every qemu-system-* binary on the first connection (~10 s here); a copy of
  # a previous host's capability cache saves that (libvirtd re-probes if it is stale).
  if [[ -d $STATE_ROOT/qemu-capabilities ]]; then
    install -d -m 0755 "$H_DIR/cache/libvirt/qemu"
    cp -a "$STATE_ROOT/qemu-capabilities" "$H_DIR/cache/libvirt/qemu/capabilities"
  fi
  hx libvirtd -d -p /run/libvirt/libvirtd.pid </dev/null >>"$H_DIR/log/libvirtd.stderr" 2>&1 ||
    die "$H_NAME: libvirtd failed to start; see $H_DIR/log/libvirtd.stderr and $H_DIR/log/libvirt/libvirtd.log"
  wait_until 20 test -S "$H_DIR/run/libvirt/libvirt-sock" ||
    die "$H_NAME: libvirt-sock did not appear within 20 s; see $H_DIR/log/libvirt/libvirtd.log"
  VIRSH_TIMEOUT=90 hvirsh version >/dev/null 2>>"$H_DIR/log/libvirtd.stderr" ||
    die "$H_NAME: libvirtd did not answer virsh version within 90 s (QEMU capability probe); see $H_DIR/log/libvirt/libvirtd.log"
  if [[ ! -d $STATE_ROOT/qemu-capabilities && -d $H_DIR/cache/libvirt/qemu/capabilities ]]; then
    cp -a "$H_DIR/cache/libvirt/qemu/capabilities" "$STATE_ROOT/qemu-capabilities.tmp.$$"
    mv -T "$STATE_ROOT/qemu-capabilities.tmp.$$" "$STATE_ROOT/qemu-capabilities"
  fi

  check_domain_type

  # no stray default network; our pool and NAT network, started and autostarted
  if hvirsh net-info default >/dev/null 2>&1; then
    hvirsh net-destroy default >/dev/null 2>&1 || true
    hvirsh net-undefine default >/dev/null
  fi
  hvirsh pool-define-as "$POOL_NAME" dir --target "$H_DIR/pool" >/dev/null
  hvirsh pool-start "$POOL_NAME" >/dev/null
  hvirsh pool-autostart "$POOL_NAME" >/dev/null
  hvirsh net-define "$H_DIR/net-$NET_NAME.xml" >/dev/null
  hvirsh net-start "$NET_NAME" >/dev/null ||
    die "$H_NAME: network $NET_NAME did not start; see $H_DIR/log/libvirt/libvirtd.log"
  hvirsh net-autostart "$NET_NAME" >/dev/null
  host_routed

  # sshd in the same mount + network namespaces, so stream-local forwards reach this host's socket
  hx /usr/sbin/sshd -t -f "$H_DIR/ssh/sshd_config" >>"$H_DIR/log/sshd.stderr" 2>&1 ||
    die "$H_NAME: sshd rejects its config; see $H_DIR/log/sshd.stderr"
  hx /usr/sbin/sshd -f "$H_DIR/ssh/sshd_config" -E "$H_DIR/log/sshd.log" </dev/null >>"$H_DIR/log/sshd.stderr" 2>&1 ||
    die "$H_NAME: sshd failed to start; see $H_DIR/log/sshd.log"
  wait_until 10 pid_from_file "$H_DIR/ssh/sshd.pid" sshd ||
    die "$H_NAME: sshd wrote no pid file within 10 s; see $H_DIR/log/sshd.log"
  wait_until 10 ssh_banner "$H_ADDR" "$SSH_PORT" ||
    die "$H_NAME: sshd on $H_ADDR:$SSH_PORT did not answer within 10 s; see $H_DIR/log/sshd.log"

  date -u +%Y-%m-%dT%H:%M:%SZ >"$H_DIR/created-at"
  host_health || die "$H_NAME: came up but is not healthy: $H_PROBLEM"
  log "$H_NAME: up in $(secs $(($(now_ms) - t0)))s (holder $hp)"
}

check_domain_type() {
  VIRSH_TIMEOUT=60 hvirsh domcapabilities --virttype "$DOMAIN_TYPE" >/dev/null 2>&1 ||
    die "$H_NAME: libvirt offers no '$DOMAIN_TYPE' domains; see $H_DIR/log/libvirt/libvirtd.log (EP_DOMAIN_TYPE=qemu|kvm forces a type)"
}

# pids_of_host: every process in the host's network or mount namespace (live or recorded), plus
# its daemons found by pid file. Never anything in this script's or init's namespaces.
pids_of_host() {
  local hp r p want=' ' skip=' '
  hp=$(holder_pid) || hp=''
  for r in "$(netns_ref "$H_NAME")" "${hp:+$(ns_ref "$hp" net)}" "${hp:+$(ns_ref "$hp" mnt)}" \
    "$(sed -n 's/^NETNS=//p' "$H_DIR/ns.env" 2>/dev/null)" "$(sed -n 's/^MNTNS=//p' "$H_DIR/ns.env" 2>/dev/null)"; do
    [[ -n $r ]] && want+="$r "
  done
  for p in 1 $$ "$BASHPID" "$PPID"; do
    for r in "$(ns_ref "$p" net)" "$(ns_ref "$p" mnt)"; do [[ -n $r ]] && skip+="$r "; done
  done
  {
    [[ -n $hp ]] && echo "$hp"
    if [[ $want != ' ' ]]; then
      find /proc/[0-9]*/ns -maxdepth 1 \( -name net -o -name mnt \) -printf '%h %l\n' 2>/dev/null |
        awk -v want="$want" -v skip="$skip" '{
          split($1, a, "/"); ino = $2; gsub(/[^0-9]/, "", ino)
          if (index(want, " " ino " ") && !index(skip, " " ino " ")) print a[3] }'
    fi
    pid_from_file "$H_DIR/run/libvirt/libvirtd.pid" libvirtd || true
    pid_from_file "$H_DIR/run/libvirt/virtlogd.pid" virtlogd || true
    pid_from_file "$H_DIR/ssh/sshd.pid" sshd || true
  } | sort -un | grep -vxE "$$|$BASHPID|$PPID|1" || true
}

alive_of() {
  local p out=()
  for p in "$@"; do [[ -d /proc/$p ]] && out+=("$p"); done
  echo "${out[*]}"
}
all_dead() { [[ -z $(alive_of "$@") ]]; }

host_down() {
  local t0 hp d pids left
  t0=$(now_ms)
  refuse_foreign
  hp=$(holder_pid) || hp=''
  # Destroy running domains first so libvirt tidies up after them.
  if [[ -n $hp ]] && pid_from_file "$H_DIR/run/libvirt/libvirtd.pid" libvirtd >/dev/null; then
    for d in $(VIRSH_TIMEOUT=10 hvirsh list --name 2>/dev/null || true); do
      VIRSH_TIMEOUT=15 hvirsh destroy "$d" >/dev/null 2>&1 || true
    done
  fi
  # shellcheck disable=SC2207
  pids=($(pids_of_host))
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    if ! wait_until 10 all_dead "${pids[@]}"; then
      left=$(alive_of "${pids[@]}")
      # shellcheck disable=SC2086
      if [[ -n $left ]]; then kill -KILL $left 2>/dev/null || true; fi
      wait_until 5 all_dead "${pids[@]}" ||
        warn "$H_NAME: processes still alive after SIGKILL: $(alive_of "${pids[@]}")"
    fi
  fi
  # Processes started later into the namespace (a race with the scan) get a second pass.
  # shellcheck disable=SC2207
  pids=($(pids_of_host))
  if ((${#pids[@]})); then
    kill -KILL "${pids[@]}" 2>/dev/null || true
    wait_until 5 all_dead "${pids[@]}" || warn "$H_NAME: left processes $(alive_of "${pids[@]}")"
  fi
  if [[ -e /run/netns/$H_NAME ]]; then ip netns delete "$H_NAME" || warn "$H_NAME: ip netns delete failed"; fi
  if ip link show "$H_VETH_R" >/dev/null 2>&1; then ip link delete "$H_VETH_R" || warn "could not delete $H_VETH_R"; fi
  rm -rf "$H_DIR"
  rm -f "$H_DESC"
  log "$H_NAME: down in $(secs $(($(now_ms) - t0)))s"
}

# discovered_hosts: indices of every host with any trace (namespace, veth, state dir, descriptor)
discovered_hosts() {
  {
    ip netns list 2>/dev/null | awk '{print $1}'
    ls -1 "$STATE_ROOT" 2>/dev/null || true
    ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//'
  } | grep -oE "^${NS_PREFIX}[0-9]+(\$|-r$|\.json$|-n$)" | grep -oE "^${NS_PREFIX}[0-9]+" |
    sed "s/^$NS_PREFIX//" | awk -v m="$MAX_HOSTS" '$1 >= 1 && $1 <= m' | sort -n -u || true
}
