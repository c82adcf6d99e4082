# shellcheck shell=bash
# testhost machine preparation: packages, users, /dev/kvm, the accelerator probe, FORWARD rules.
# Sourced by test/hosts/testhost; not executable on its own.
# shellcheck disable=SC2034 # DOMAIN_TYPE_* are used by the other files

# ---------------------------------------------------------------------------------------------
# machine preparation (packages, users, directories)

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

ensure_packages() {
  local missing=() p c
  if command -v dpkg-query >/dev/null; then
    for p in "${APT_PACKAGES[@]}"; do pkg_installed "$p" || missing+=("$p"); done
  fi
  if ((${#missing[@]})); then
    command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get to install them"
    log "installing missing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    timeout 900 apt-get update </dev/null || die "apt-get update failed"
    timeout 1800 apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-confold \
      "${missing[@]}" </dev/null || die "apt-get install ${missing[*]} failed"
  fi
  for c in "${REQUIRED_CMDS[@]}"; do
    command -v "$c" >/dev/null || die "required command '$c' not found (packages: ${APT_PACKAGES[*]})"
  done
  [[ -x /usr/sbin/sshd ]] || die "/usr/sbin/sshd not found (package openssh-server)"
}

ensure_system() {
  # Debian's libvirtd resolves its built-in default user and group "libvirt-qemu" before it reads
  # qemu.conf, so both must exist; the kvm group is what opens /dev/kvm.
  getent group kvm >/dev/null || groupadd --system kvm
  getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
  if ! getent passwd libvirt-qemu >/dev/null; then
    useradd --system --gid libvirt-qemu --groups kvm --no-create-home --home-dir /var/lib/libvirt \
      --shell /usr/sbin/nologin --comment "Libvirt Qemu" libvirt-qemu
  fi
  id -nG libvirt-qemu | tr ' ' '\n' | grep -qx kvm || usermod -a -G kvm libvirt-qemu
  # /var/log/libvirt as libvirtd expects; the others are mount points for the per-host binds.
  local d
  for d in /var/log/libvirt /run/libvirt /var/lib/libvirt /var/cache/libvirt /etc/libvirt /run/sshd; do
    [[ -d $d ]] || install -d -m 0755 "$d"
  done
  case "$STATE_ROOT/" in
  /run/libvirt/* | /var/run/libvirt/* | /var/lib/libvirt/* | /var/log/libvirt/* | /var/cache/libvirt/* | /etc/libvirt/* | /root/* | /)
    die "EP_TESTHOST_STATE=$STATE_ROOT lies under a directory the hosts mount over; pick another" ;;
  esac
}

ensure_state_root() {
  if [[ -d $STATE_ROOT && ! -e $STATE_ROOT/$MARKER ]] && [[ -n $(ls -A "$STATE_ROOT") ]]; then
    die "$STATE_ROOT exists, is not empty and is not a testhost state root (no $MARKER)"
  fi
  install -d -m 0755 "$STATE_ROOT"
  [[ -e $STATE_ROOT/$MARKER ]] || echo "state root of test/hosts/testhost; 'testhost down' deletes it" >"$STATE_ROOT/$MARKER"
  if [[ ! -f $STATE_ROOT/id_ed25519 ]]; then
    rm -f "$STATE_ROOT/id_ed25519.pub"
    ssh-keygen -q -t ed25519 -N '' -C "egress-proxies-testhost-client" -f "$STATE_ROOT/id_ed25519" </dev/null
  fi
  chmod 0600 "$STATE_ROOT/id_ed25519"
}

# Accelerator probe: a BIOS boot sector that enters long mode, stores 2 x 32 MiB bytes one at a
# time, prints "EP-PROBE-OK" on COM1 and writes 0x10 to isa-debug-exit (QEMU exits 33). Its
# source (GNU as; `as --64 probe.S && ld -Ttext 0x7c00 --oformat binary`) is
# test/hosts/probe.S. Nested KVM that runs this far slower than TCG (seen on these machines: a
# Linux guest never left its decompressor) is treated as unusable.
PROBE_HEX='fa31c08ed88ec08ed0bc007cfcbaf803b052eee4920c02e692bf0010b9001831c0f3ab66c70600100320000066c706002003300000bf003066b883000000b9400066890583c708660500002000e2f2660f0116f87c0f20e06683c8200f22e066b8001000000f22d866b9800000c00f32660d000100000f300f20c0660d010000800f22c0ea897c080066b810008ed88ec08ed066baf803b04cee41b80200000048c7c70000400048c7c10000000231c000c8880748ffc748ffc975f441ffc875df488d3536000000ac84c07403eeebf866baf400b010eefaf4ebfc0f1f440000000000000000000000000000009a200000000000009200001700e07c000045502d50524f42452d4f4b0a'
PROBE_MARK='EP-PROBE-OK'

# ---------------------------------------------------------------------------------------------
# domain type: kvm only where KVM runs the probe guest at least as fast as TCG

write_probe_image() {
  local hex=$PROBE_HEX esc='' i
  for ((i = 0; i < ${#hex}; i += 2)); do esc+="\\x${hex:i:2}"; done
  {
    # shellcheck disable=SC2059 # the format is our own \xHH string
    printf "$esc"
    head -c $((510 - ${#hex} / 2)) /dev/zero
    printf '\x55\xaa'
  } >"$1"
}

# probe_run ACCEL TIMEOUT_S IMG LOG -> sets PR_OK (0/1), PR_MS, PR_OUT
probe_run() {
  local accel=$1 t=$2 img=$3 logf=$4 out rc start
  out=$(mktemp)
  start=$(now_ms)
  rc=0
  timeout -k 2 "$t" qemu-system-x86_64 -nodefaults -no-user-config -machine "pc,accel=$accel" -m 64 \
    -display none -no-reboot -serial "file:$out" -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
    -drive "file=$img,format=raw,if=ide,index=0" </dev/null >"$logf" 2>&1 9<&- || rc=$?
  PR_MS=$(($(now_ms) - start))
  PR_OUT=$(tr -cd '[:alnum:]-' <"$out")
  rm -f "$out"
  PR_OK=0
  [[ $rc -eq 33 && $PR_OUT == *"$PROBE_MARK"* ]] && PR_OK=1
  echo "exit=$rc ms=$PR_MS serial=$PR_OUT" >>"$logf"
}

probe_key() {
  local kvm=none
  [[ -c /dev/kvm ]] && kvm=$(stat -c '%t:%T' /dev/kvm)
  echo "qemu=$(qemu-system-x86_64 --version | head -1 | awk '{print $4}') kernel=$(uname -r) kvm=$kvm"
}

select_domain_type() {
  local cache="$STATE_ROOT/probe.json" key img tcg_ms tcg_ok kvm_t kvm_ok kvm_ms kvm_out reason
  case "${EP_DOMAIN_TYPE:-}" in
  kvm | qemu)
    DOMAIN_TYPE=$EP_DOMAIN_TYPE
    DOMAIN_TYPE_SOURCE="EP_DOMAIN_TYPE"
    DOMAIN_TYPE_REASON="forced by EP_DOMAIN_TYPE=$EP_DOMAIN_TYPE"
    return 0
    ;;
  "") ;;
  *) die "EP_DOMAIN_TYPE must be kvm or qemu (got '$EP_DOMAIN_TYPE')" ;;
  esac
  DOMAIN_TYPE_SOURCE="probe"
  key=$(probe_key)
  if [[ -f $cache ]] && grep -qF "\"key\": $(json_str "$key")" "$cache"; then
    DOMAIN_TYPE=$(sed -n 's/^  "domainType": "\([a-z]*\)".*/\1/p' "$cache")
    DOMAIN_TYPE_REASON=$(sed -n 's/^  "reason": "\(.*\)",$/\1/p' "$cache")
    [[ $DOMAIN_TYPE == kvm || $DOMAIN_TYPE == qemu ]] && return 0
  fi
  img="$STATE_ROOT/probe.img"
  write_probe_image "$img"
  probe_run tcg 30 "$img" "$STATE_ROOT/probe-tcg.log"
  tcg_ok=$PR_OK tcg_ms=$PR_MS
  [[ $tcg_ok == 1 ]] || warn "TCG probe failed (see $STATE_ROOT/probe-tcg.log); using qemu anyway"
  kvm_ok=0 kvm_ms=0 kvm_out=''
  # KVM only counts if it is not slower than TCG, so it need not run longer than TCG did.
  kvm_t=$((tcg_ms / 1000 + 3))
  if [[ -c /dev/kvm ]]; then
    probe_run kvm "$kvm_t" "$img" "$STATE_ROOT/probe-kvm.log"
    kvm_ok=$PR_OK kvm_ms=$PR_MS kvm_out=$PR_OUT
  fi
  if [[ ! -c /dev/kvm ]]; then
    DOMAIN_TYPE=qemu reason="no /dev/kvm"
  elif [[ $kvm_ok != 1 ]]; then
    DOMAIN_TYPE=qemu reason="KVM probe guest did not finish within ${kvm_t}s (serial '$kvm_out'); TCG took $(secs "$tcg_ms")s"
  elif [[ $tcg_ok == 1 ]] && ((kvm_ms > tcg_ms)); then
    DOMAIN_TYPE=qemu reason="KVM probe took $(secs "$kvm_ms")s, slower than TCG ($(secs "$tcg_ms")s)"
  else
    DOMAIN_TYPE=kvm reason="KVM probe took $(secs "$kvm_ms")s, TCG $(secs "$tcg_ms")s"
  fi
  DOMAIN_TYPE_REASON=$reason
  rm -f "$img"
  write_atomic "$cache" 0644 <<EOF
{
  "key": $(json_str "$key"),
  "domainType": "$DOMAIN_TYPE",
  "reason": $(json_str "$reason"),
  "kvm": { "ok": $([[ $kvm_ok == 1 ]] && echo true || echo false), "ms": $kvm_ms, "timeoutSeconds": $kvm_t },
  "tcg": { "ok": $([[ $tcg_ok == 1 ]] && echo true || echo false), "ms": $tcg_ms },
  "probedAt": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
EOF
  log "domain type: $DOMAIN_TYPE ($reason)"
}

ensure_dev_kvm() {
  if [[ $DOMAIN_TYPE == kvm && ! -c /dev/kvm ]]; then die "domain type kvm but /dev/kvm is missing"; fi
  [[ -c /dev/kvm ]] || return 0
  # libvirt runs QEMU as libvirt-qemu (member of kvm). Its capability probe sees KVM, and unless
  # that user can open /dev/kvm too, libvirtd finds its capability cache "outdated" on every
  # lookup and re-probes every QEMU binary (~10 s per connection here), whatever domain type is
  # used. udev makes /dev/kvm root:kvm 0660 on a normal host; do the same where it did not.
  local grp mode
  grp=$(stat -c %G /dev/kvm)
  mode=$(stat -c %a /dev/kvm)
  if [[ $grp != kvm ]] || (((8#$mode & 8#060) != 8#060)); then
    log "giving group kvm read/write on /dev/kvm (was group $grp, mode $mode), as udev does on a normal host"
    chgrp kvm /dev/kvm
    chmod g+rw /dev/kvm
  fi
}

# ---------------------------------------------------------------------------------------------
# firewall: nothing is routed between the test namespaces and anything else (defence in depth;
# the namespaces have no default route in the first place)

fw_ensure() {
  local t d
  for t in iptables ip6tables; do
    command -v "$t" >/dev/null || continue
    for d in -i -o; do
      if ! "$t" -w 5 -C FORWARD "$d" "${NS_PREFIX}+" -m comment --comment "$FW_COMMENT" -j DROP 2>/dev/null; then
        "$t" -w 5 -I FORWARD "$d" "${NS_PREFIX}+" -m comment --comment "$FW_COMMENT" -j DROP 2>/dev/null ||
          warn "$t: could not add FORWARD $d ${NS_PREFIX}+ DROP (routes are still absent)"
      fi
    done
  done
}

fw_remove() {
  local t d n
  for t in iptables ip6tables; do
    command -v "$t" >/dev/null || continue
    for d in -i -o; do
      for ((n = 0; n < 20; n++)); do
        "$t" -w 5 -D FORWARD "$d" "${NS_PREFIX}+" -m comment --comment "$FW_COMMENT" -j DROP 2>/dev/null || break
      done
    done
  done
}

fw_present() { iptables -w 5 -S FORWARD 2>/dev/null | grep -c -- "$FW_COMMENT" || true; }
