#!/usr/bin/env bash
# The raw floor of provisioning: the steps the proxy workflow takes for one proxy, done by `virsh`
# over qemu+ssh:// to the test hosts from a shell script, with no Temporal and no worker: an
# overlay volume on the base, a cloud-init seed built locally (genisoimage) and uploaded, the
# domain defined and started. The VM is the provisioning bench's (128 MiB, an empty 64 MiB qcow2
# base that never boots).
#
#   bench/provision-virsh.sh N PARALLEL
#
# N proxies spread round-robin over the test hosts (ep-h1, ep-h2, ... from the test hosts' state),
# by PARALLEL scripts at once (each creates its share one proxy after another), one virsh process
# per step, as a plain script would.
# Prints one JSON line: {"n","parallel","totalMs","perProxyMs"} (perProxyMs = totalMs x PARALLEL / N: one script's time per proxy).
# Setup (the base upload) and teardown are outside the timing. Needs: test/hosts/testhost up 2.
set -euo pipefail

N=${1:?usage: bench/provision-virsh.sh N PARALLEL}
PARALLEL=${2:?usage: bench/provision-virsh.sh N PARALLEL}
STATE=${EP_TESTHOST_STATE:-/var/lib/egress-proxies-testhosts}
[ -f "$STATE/hosts.json" ] || { echo "no test hosts under $STATE: run test/hosts/testhost up 2" >&2; exit 1; }
# genisoimage builds the seed, jq reads the host files: installed (as root) when missing.
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/env.sh"
source "$EP_ROOT/scripts/deps.sh"
ep_apt_packages genisoimage jq || { echo "bench/provision-virsh.sh: genisoimage and jq are needed (apt-get install genisoimage jq)" >&2; exit 1; }

HOSTFILES=("$STATE"/ep-h*.json)
[ -f "${HOSTFILES[0]}" ] || { echo "no test host ep-h* under $STATE" >&2; exit 1; }
mapfile -t URIS < <(for f in "${HOSTFILES[@]}"; do jq -r .virshUri "$f"; done)
mapfile -t NETS < <(for f in "${HOSTFILES[@]}"; do jq -r .network "$f"; done)
mapfile -t POOLS < <(for f in "${HOSTFILES[@]}"; do jq -r .pool "$f"; done)
H=${#URIS[@]}
RUN="vb$(date +%s%N | cut -c8-14)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

v() { virsh -q -c "$1" "${@:2}"; }

# Setup: a base on every host (as the image workflow leaves it), and the pool's directory there.
qemu-img create -q -f qcow2 "$TMP/empty.qcow2" 64M
SIZE=$(stat -c %s "$TMP/empty.qcow2")
declare -a DIRS
for h in $(seq 0 $((H - 1))); do
  v "${URIS[$h]}" vol-create-as "${POOLS[$h]}" "base-$RUN.qcow2" "$SIZE" --format qcow2 >/dev/null
  v "${URIS[$h]}" vol-upload --pool "${POOLS[$h]}" "base-$RUN.qcow2" "$TMP/empty.qcow2"
  DIRS[h]=$(dirname "$(v "${URIS[$h]}" vol-path --pool "${POOLS[$h]}" "base-$RUN.qcow2")")
done

# One proxy: overlay, seed (built here, uploaded), define, start.
one() {
  local i=$1 h=$(($1 % H)) name="ep_${RUN}_$1" d="$TMP/p$1"
  local uri=${URIS[$h]} pool=${POOLS[$h]} dir=${DIRS[$h]}
  mkdir -p "$d"
  printf 'instance-id: %s\nlocal-hostname: p%s\n' "$name" "$i" >"$d/meta-data"
  printf '#cloud-config\nhostname: p%s\n' "$i" >"$d/user-data"
  genisoimage -quiet -output "$d/seed.iso" -volid cidata -joliet -rock "$d/user-data" "$d/meta-data"
  local seedsize
  seedsize=$(stat -c %s "$d/seed.iso")
  cat >"$d/dom.xml" <<XML
<domain type='qemu'>
  <name>$name</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os><type>hvm</type><boot dev='hd'/></os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='$dir/$name.qcow2'/><target dev='vda' bus='virtio'/></disk>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$dir/$name.seed.iso'/><target dev='vdb' bus='virtio'/><readonly/></disk>
    <interface type='network'><source network='${NETS[$h]}'/><model type='virtio'/></interface>
    <serial type='file'><source path='$dir/$name.console.log'/><target port='0'/></serial>
  </devices>
</domain>
XML
  local steps=(
    "vol-create-as $pool $name.qcow2 1G --format qcow2 --backing-vol base-$RUN.qcow2 --backing-vol-format qcow2"
    "vol-create-as $pool $name.seed.iso $seedsize --format raw"
    "vol-upload --pool $pool $name.seed.iso $d/seed.iso"
    "define $d/dom.xml"
    "start $name"
  )
  local s
  # shellcheck disable=SC2086 # each step is a virsh command line
  for s in "${steps[@]}"; do v "$uri" $s >/dev/null; done
}

# A script: proxies k, k + PARALLEL, k + 2 x PARALLEL, ... one after another.
script() {
  local k=$1 i
  for ((i = k; i < N; i += PARALLEL)); do one "$i"; done
}

t0=$(date +%s%N)
pids=()
for k in $(seq 0 $((PARALLEL - 1))); do
  script "$k" &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
t1=$(date +%s%N)

# Teardown (untimed): every domain and volume of this run, one virsh session per proxy, hosts in
# parallel.
for h in $(seq 0 $((H - 1))); do
  (
    for ((i = h; i < N; i += H)); do
      name="ep_${RUN}_$i"
      v "${URIS[$h]}" "destroy $name ; undefine $name ; vol-delete --pool ${POOLS[$h]} $name.qcow2 ; vol-delete --pool ${POOLS[$h]} $name.seed.iso" >/dev/null 2>&1 || true
    done
    # The serial logs live beside the volumes: the pool lists them once refreshed.
    v "${URIS[$h]}" pool-refresh "${POOLS[$h]}" >/dev/null 2>&1 || true
    for ((i = h; i < N; i += H)); do
      v "${URIS[$h]}" vol-delete --pool "${POOLS[$h]}" "ep_${RUN}_$i.console.log" >/dev/null 2>&1 || true
    done
    v "${URIS[$h]}" vol-delete --pool "${POOLS[$h]}" "base-$RUN.qcow2" >/dev/null 2>&1 || true
  ) &
done
wait
[ "$fail" = 0 ] || { echo "a script failed" >&2; exit 1; }

total=$(((t1 - t0) / 1000000))
echo "{\"n\":$N,\"parallel\":$PARALLEL,\"totalMs\":$total,\"perProxyMs\":$((total * PARALLEL / N))}"
