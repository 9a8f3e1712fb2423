#!/usr/bin/env bash
# cluster.stale_state: scripts/cluster-local.sh never acts on state left from an earlier boot.
# The failure it guards against (seen in CI): a machine image taken while a cluster was up kept
# /run/mpirl-cluster; at the next boot `up 2` stopped the recorded node "head" by its recorded
# network-namespace number, which a new node's namespace had been given, and killed that node.
# Here the stale record names the namespace of a live bystander process, and the boot id it
# carries is not this boot's: `up`, `kill`, `status` and `down` must all leave the bystander alone.
# A second check: a node killed with `kill` keeps no record of its namespace's number (which the
# kernel may reuse), so `down` cannot reach a process that has it later.
# Usage: stale_state_test.sh REPO WORKDIR   (root; takes the cluster lock in ctest)
set -euo pipefail
repo=$1 work=$2/stale-state
script="$repo/scripts/cluster-local.sh"
export MPIRL_CLUSTER_DIR="$work/state"
fail() { echo "FAILED: $*"; exit 1; }
ok() { echo "ok: $*"; }
rm -rf "$work"; mkdir -p "$work"

# a bystander in its own network namespace (as a new node's holder would be)
unshare --net sleep 600 &
by=$!
trap 'kill $by 2>/dev/null || true; "$script" down >/dev/null 2>&1 || true' EXIT
for ((i = 0; i < 100; i++)); do
  ns=$(readlink "/proc/$by/ns/net"); [ "$ns" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.05
done
[ "$ns" != "$(readlink /proc/self/ns/net)" ] || fail "the bystander did not get its own namespace"

# the stale record: node "head" with the bystander's namespace and pid, from another boot
mkdir -p "$MPIRL_CLUSTER_DIR/nodes/head"
echo "$ns" >"$MPIRL_CLUSTER_DIR/nodes/head/netns"
echo "$by" >"$MPIRL_CLUSTER_DIR/nodes/head/pid"
echo 00000000-0000-0000-0000-000000000000 >"$MPIRL_CLUSTER_DIR/boot_id"

out=$("$script" up 2 2>&1) || { echo "$out"; fail "up 2 with stale state exited non-zero"; }
kill -0 $by 2>/dev/null || { echo "$out"; fail "up killed a process through the stale record"; }
echo "$out" | grep -q "stopping head" && { echo "$out"; fail "up acted on the stale node head"; }
echo "$out" | grep -q "from an earlier boot" || { echo "$out"; fail "up did not say the state was stale"; }
ok "up 2 forgot the earlier boot's state and left the bystander alive"
[ "$(cat "$MPIRL_CLUSTER_DIR/boot_id")" = "$(cat /proc/sys/kernel/random/boot_id)" ] ||
  fail "up did not record this boot's id"
"$script" status || fail "status after up: not every node is up"

# a killed node keeps no namespace number; down after it reaches only the cluster's own processes
"$script" kill n2 >/dev/null
[ ! -e "$MPIRL_CLUSTER_DIR/nodes/n2/netns" ] || fail "a killed node still records its namespace"
"$script" status >/dev/null && fail "status exits 0 with n2 killed"
"$script" down >/dev/null
[ ! -e "$MPIRL_CLUSTER_DIR" ] || fail "down left $MPIRL_CLUSTER_DIR"
kill -0 $by 2>/dev/null || fail "kill/down killed the bystander"
ok "kill n2 and down stopped only the cluster's nodes"
echo "ok: cluster.stale_state"
