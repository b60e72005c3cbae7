#!/bin/sh
# A real two-host job on one machine: two network namespaces joined by a veth pair are hosts
# 10.77.0.1 and 10.77.0.2. The fathom launcher, started in the first, reads a hostfile of both
# and launches one rank on each through Open MPI; an rsh agent that enters the other namespace
# stands in for ssh, and the ranks (and Open MPI's daemons) talk over TCP across the veth pair.
# The trained weights equal those of the same job as 2 ranks on one host, bit for bit.
# Then a host is lost: the rank on the second host dies after step 5 and the host stops answering;
# `--max_restarts 1 --min_procs 1` restarts the job on the first host alone, which resumes the
# step-4 checkpoint at 1 rank with the same global batch and finishes.
# Skips, saying why, where network namespaces cannot be created (they need root).
#   two_hosts.sh FATHOM_TRAIN FATHOM_LAUNCHER WORK_DIR
set -u
train=$1 launcher=$2 work=$3
fail() { echo "FAILED: $*"; exit 1; }
ns0=fathom_h0_$$ ns1=fathom_h1_$$ link0=vf0_$$ link1=vf1_$$
cleanup() { ip netns del "$ns0" 2>/dev/null; ip netns del "$ns1" 2>/dev/null; }
trap cleanup EXIT
if ! ip netns add "$ns0" 2>/dev/null; then
  echo "SKIPPED: cannot create a network namespace here (ip netns add needs root and CAP_SYS_ADMIN)"
  exit 0
fi
rm -rf "$work" && mkdir -p "$work"
ip netns add "$ns1" || fail "ip netns add"
ip link add "$link0" type veth peer name "$link1" || fail "ip link add veth"
ip link set "$link0" netns "$ns0" && ip link set "$link1" netns "$ns1" || fail "ip link set netns"
ip -n "$ns0" addr add 10.77.0.1/24 dev "$link0" && ip -n "$ns1" addr add 10.77.0.2/24 dev "$link1" || fail "ip addr"
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "$link0" up && ip -n "$ns1" link set "$link1" up || fail "ip link up"

# Open MPI runs `AGENT HOST COMMAND...` to start its daemon on a remote host.
cat >"$work/netns_rsh" <<AGENT
#!/bin/sh
host=\$1
shift
case \$host in
  10.77.0.1) ns=$ns0 ;;
  10.77.0.2) ns=$ns1 ;;
  *) echo "netns_rsh: unknown host \$host" >&2; exit 255 ;;
esac
echo "\$host" >>"$work/agent.log"
# The lost-host test: once the job has used the second host, it is gone.
if [ -f "$work/lose_host1" ] && [ "\$host" = 10.77.0.2 ]; then
  [ -f "$work/host1_used" ] && { echo "netns_rsh: \$host is gone" >&2; exit 255; }
  touch "$work/host1_used"
fi
exec ip netns exec \$ns sh -c "\$*"
AGENT
chmod +x "$work/netns_rsh"
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$work/hostfile"

job="--preset tiny --steps 6 --eval-interval 0"
ip netns exec "$ns0" "$launcher" --hostfile "$work/hostfile" \
  --launcher_args "--mca plm_rsh_agent $work/netns_rsh --mca btl tcp,self --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24" \
  "$train" $job --out "$work/two_hosts" >"$work/two_hosts.log" 2>&1
status=$?
cat "$work/two_hosts.log"
[ "$status" -eq 0 ] || fail "the two-host job exited with $status"
grep -q "1024 tokens per step; 2 ranks" "$work/two_hosts.log" || fail "the job did not run 2 ranks"
grep -qx "10.77.0.2" "$work/agent.log" || fail "Open MPI did not start a daemon on the second host"
"$launcher" --num_procs 2 "$train" $job --out "$work/one_host" >"$work/one_host.log" 2>&1 ||
  { cat "$work/one_host.log"; fail "the one-host job failed"; }
cmp "$work/two_hosts/model.safetensors" "$work/one_host/model.safetensors" || fail "the weights differ"
echo "two hosts (network namespaces, TCP): the weights of the one-host run"

touch "$work/lose_host1"
agent_args="--mca plm_rsh_agent $work/netns_rsh --mca btl tcp,self --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24"
FATHOM_TEST_KILL_AT_STEP=5 ip netns exec "$ns0" "$launcher" --hostfile "$work/hostfile" --max_restarts 1 --min_procs 1 \
  --launcher_args "$agent_args" "$train" --preset tiny --steps 8 --save-every 2 --eval-interval 0 \
  --out "$work/lost_host" >"$work/lost_host.log" 2>&1
status=$?
cat "$work/lost_host.log"
[ "$status" -eq 0 ] || fail "the job that lost a host exited with $status"
grep -q "^fathom: host 10.77.0.2 does not answer; restarting without it" "$work/lost_host.log" || fail "no lost-host line"
grep -q "resuming $work/lost_host/checkpoints/global_step4 (step 4, 2 ranks)" "$work/lost_host.log" || fail "no resume"
grep -q "train_batch_size 16 = 16 per rank x 1 accumulation x 1 rank" "$work/lost_host.log" || fail "not 1 rank"
grep -q "^fathom-train: done" "$work/lost_host.log" || fail "the restarted job did not finish"
echo "a lost host: the job restarted on the other one at 1 rank and finished"
