#!/usr/bin/env bash
# What one domain start costs a host's CPU, and where it goes: our domain XML (built by
# lib/kvm2/proxy/domain-xml.ts, the provisioning bench's VM: 128 MiB, an empty 64 MiB qcow2 that
# never boots, a 1 MiB seed) defined and started paused on a test host (`virsh start --paused`:
# QEMU set up, the guest not run), against a bare QEMU with the same devices and memory started
# paused by hand. Reports, per run and as medians: the QEMU process's CPU seconds, libvirtd's,
# the start's wall time; and once, the QMP commands libvirt sent during the start (its debug log,
# switched on for that one start and off again).
#
#   bench/qemu-start.sh [RUNS] [CPU_ELEMENT]   (RUNS default 5; EP_TESTHOST_ONLY=ep-h2 picks another host)
#
# CPU_ELEMENT, e.g. "<cpu mode='maximum' check='none'/>", is put in the domain XML before <clock>
# (ours has none for TCG): whether it changes what libvirt asks QEMU at the start.
#
# Needs (as root): test/hosts/testhost up. Leaves nothing behind (its domain and volumes are removed).
set -euo pipefail
RUNS=${1:-5}
CPU_ELEMENT=${2:-}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bench/qemu-start.sh [RUNS] (RUNS a positive integer, got $RUNS)" >&2; exit 2; }
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/env.sh"
STATE=${EP_TESTHOST_STATE:-/var/lib/egress-proxies-testhosts}
HOST=${EP_TESTHOST_ONLY:-ep-h1}
HF="$STATE/$HOST.json"
[ -f "$HF" ] || { echo "no test host $HOST under $STATE: run test/hosts/testhost up 2" >&2; exit 1; }
X="$EP_ROOT/test/hosts/testhost"
POOL=$(jq -r .pool "$HF")
NET=$(jq -r .network "$HF")
LIBVIRTD=$(jq -r .pids.libvirtd "$HF")
v() { "$X" exec "$HOST" virsh -q -c qemu:///system "$@"; }
POOL_DIR=$(v pool-dumpxml "$POOL" | sed -n 's:.*<path>\(.*\)</path>.*:\1:p')
NAME="qs$(date +%s%N | cut -c8-14)"
TMP=$(mktemp -d)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cleanup() {
  v destroy "$NAME" >/dev/null 2>&1 || true
  v undefine "$NAME" >/dev/null 2>&1 || true
  v vol-delete --pool "$POOL" "$NAME.qcow2" >/dev/null 2>&1 || true
  v vol-delete --pool "$POOL" "$NAME.seed" >/dev/null 2>&1 || true
  "$X" exec "$HOST" virt-admin daemon-log-filters "" >/dev/null 2>&1 || true
  rm -rf "$TMP" "$POOL_DIR/$NAME.xml" "$POOL_DIR/$NAME.console.log"
}
trap cleanup EXIT

v vol-create-as "$POOL" "$NAME.qcow2" 64M --format qcow2 >/dev/null
v vol-create-as "$POOL" "$NAME.seed" 1M --format raw >/dev/null
node --input-type=module -e "
import { buildDomainXml } from '$EP_ROOT/lib/kvm2/proxy/domain-xml.ts';
process.stdout.write(buildDomainXml({
  name: '$NAME', domainType: '$(jq -r .domainType "$HF")', vcpus: 1, memoryMiB: 128,
  overlayPath: '$POOL_DIR/$NAME.qcow2', seedPath: '$POOL_DIR/$NAME.seed', network: '$NET',
  consoleLogPath: '$POOL_DIR/$NAME.console.log',
  metadata: { ownerUid: 'bench', proxyName: '$NAME', providerEntry: 'bench', createdAt: new Date().toISOString() },
}));" >"$TMP/domain.xml"
if [ -n "$CPU_ELEMENT" ]; then
  awk -v el="$CPU_ELEMENT" '/<clock / { print "  " el } { print }' "$TMP/domain.xml" >"$TMP/d2.xml"
  mv "$TMP/d2.xml" "$TMP/domain.xml"
  echo "domain XML with $CPU_ELEMENT"
fi
cp "$TMP/domain.xml" "$POOL_DIR/$NAME.xml" # the host's virsh reads it from its own mount namespace

# One start through libvirt: prints "qemuCPU libvirtdCPU wallMs" (CPU in clock ticks, 1/100 s).
libvirt_start() {
  v define "$POOL_DIR/$NAME.xml" >/dev/null
  local l0 t0 t1 pid q l1
  l0=$(ticks "$LIBVIRTD")
  t0=$(date +%s%N)
  v start --paused "$NAME" >/dev/null
  t1=$(date +%s%N)
  l1=$(ticks "$LIBVIRTD")
  pid=$(pgrep -f "guest=$NAME," | head -1)
  q=$(ticks "$pid")
  v destroy "$NAME" >/dev/null
  v undefine "$NAME" >/dev/null
  echo "$q $((l1 - l0)) $(((t1 - t0) / 1000000))"
}

# One bare QEMU with the same devices, paused (-S), until its QMP socket answers plus 0.5 s: its
# ticks. With QOM=1, it is first asked what libvirt asks at a start: every boolean property of the
# CPU object read with one qom-get each (after a qom-list), over QMP one at a time; prints "ticks gets".
bare_start() {
  local s="$TMP/qmp.sock" pid i q g=0
  rm -f "$s"
  qemu-system-x86_64 -S -display none -nodefaults -no-user-config -qmp "unix:$s,server=on,wait=off" \
    -machine pc,usb=off -accel tcg -cpu qemu64 -m 128 -smp 1 \
    -sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny \
    -device virtio-serial-pci,id=vs0 \
    -blockdev "{\"driver\":\"file\",\"filename\":\"$POOL_DIR/$NAME.qcow2\",\"node-name\":\"f0\"}" \
    -blockdev '{"driver":"qcow2","node-name":"d0","file":"f0"}' -device virtio-blk-pci,drive=d0 \
    -blockdev "{\"driver\":\"file\",\"filename\":\"$POOL_DIR/$NAME.seed\",\"node-name\":\"f1\",\"read-only\":true}" \
    -blockdev '{"driver":"raw","node-name":"d1","file":"f1","read-only":true}' -device virtio-blk-pci,drive=d1 \
    -netdev user,id=n0 -device virtio-net-pci,netdev=n0 \
    -chardev "socket,id=ga,path=$TMP/ga.sock,server=on,wait=off" -device virtserialport,bus=vs0.0,chardev=ga,name=org.qemu.guest_agent.0 \
    -serial "file:$TMP/console.log" \
    -object rng-random,id=rng0,filename=/dev/urandom -device virtio-rng-pci,rng=rng0 2>/dev/null &
  pid=$!
  for ((i = 0; i < 250; i++)); do [ -S "$s" ] && break; sleep 0.02; done
  [ -S "$s" ] || { kill "$pid"; echo "bare QEMU: no QMP socket after 5 s" >&2; return 1; }
  if [ "${QOM:-0}" = 1 ]; then g=$(timeout 30 python3 - "$s" <<'PY'
import json, socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); f = c.makefile('rw')
def ask(cmd, **args):
    f.write(json.dumps({'execute': cmd, 'arguments': args} if args else {'execute': cmd}) + '\n'); f.flush()
    while True:
        r = json.loads(f.readline())
        if 'return' in r or 'error' in r: return r
f.readline(); ask('qmp_capabilities')
cpu = '/machine/unattached/device[0]'
props = [p['name'] for p in ask('qom-list', path=cpu)['return'] if p['type'] == 'bool']
for p in props: ask('qom-get', path=cpu, property=p)
print(len(props))
PY
  ); fi
  sleep 0.5
  q=$(ticks "$pid")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  if [ "${QOM:-0}" = 1 ]; then echo "$q $g"; else echo "$q"; fi
}

# The QMP commands of one start, from libvirtd's debug log (on for this start only).
"$X" exec "$HOST" sh -c ': > /var/log/libvirt/qemu-start-bench.log'
"$X" exec "$HOST" virt-admin daemon-log-outputs "1:file:/var/log/libvirt/qemu-start-bench.log 3:file:/var/log/libvirt/libvirtd.log" >/dev/null
"$X" exec "$HOST" virt-admin daemon-log-filters "1:qemu.qemu_monitor" >/dev/null
libvirt_start >/dev/null
"$X" exec "$HOST" virt-admin daemon-log-filters "" >/dev/null
"$X" exec "$HOST" virt-admin daemon-log-outputs "3:file:/var/log/libvirt/libvirtd.log" >/dev/null
qmp=$("$X" exec "$HOST" sh -c 'grep -o "QEMU_MONITOR_SEND_MSG.*" /var/log/libvirt/qemu-start-bench.log | grep -o "\"execute\":\"[a-z-]*\"" | cut -d\" -f4 | sort | uniq -c | sort -rn | awk "{printf \"%s %s, \", \$2, \$1}"; rm -f /var/log/libvirt/qemu-start-bench.log')
echo "QMP commands libvirt sent during one start (with debug logging on; not timed): ${qmp%, }"

med() { sort -n | awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
: >"$TMP/lv"
: >"$TMP/bare"
: >"$TMP/qom"
for ((r = 1; r <= RUNS; r++)); do
  read -r q l w < <(libvirt_start)
  echo "$q $l $w" >>"$TMP/lv"
  b=$(bare_start)
  echo "$b" >>"$TMP/bare"
  read -r bq gets < <(QOM=1 bare_start)
  echo "$bq" >>"$TMP/qom"
  echo "run $r: libvirt start --paused: QEMU $q ticks, libvirtd $l ticks, ${w} ms; bare QEMU paused: $b ticks;" \
    "bare QEMU asked libvirt's $gets qom-gets: $bq ticks (1 tick = 10 ms of CPU)"
done
echo "medians over $RUNS alternating runs on $HOST ($(cut -d' ' -f1-3 /proc/loadavg) load): libvirt start: QEMU $(cut -d' ' -f1 "$TMP/lv" | med) ticks," \
  "libvirtd $(cut -d' ' -f2 "$TMP/lv" | med) ticks, wall $(cut -d' ' -f3 "$TMP/lv" | med) ms; bare QEMU with the same devices: $(med <"$TMP/bare") ticks;" \
  "the same asked the CPU's properties one qom-get each: $(med <"$TMP/qom") ticks"
