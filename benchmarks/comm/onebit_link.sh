#!/bin/sh
# The compressed optimizers where they help: two "hosts" (network namespaces joined by a veth pair, both ends
# shaped by tc's token bucket to RATE, default 1gbit) run one rank each of fathom_onebit_bench
# over Open MPI's TCP transport on that link only (shared memory would bypass it). Prints the
# bench's table: bytes per step and step time, AdamW and LAMB beside the compressed optimizers.
# Needs root (namespaces) and the sch_tbf qdisc; where either is missing it says so and stops,
# and `mpirun -np 2 fathom_onebit_bench` still reports the bytes.
#   onebit_link.sh BUILD_DIR [RATE] [STEPS]
set -u
build=${1:?usage: onebit_link.sh BUILD_DIR [RATE] [STEPS]}
rate=${2:-1gbit} steps=${3:-8}
bench="$build/benchmarks/comm/fathom_onebit_bench"
[ -x "$bench" ] || { echo "onebit_link.sh: no $bench; build first"; exit 1; }
ns0=fathom_link0_$$ ns1=fathom_link1_$$ link0=vl0_$$ link1=vl1_$$ work=$(mktemp -d)
cleanup() { ip netns del "$ns0" 2>/dev/null; ip netns del "$ns1" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
if ! ip netns add "$ns0" 2>/dev/null; then
  echo "onebit_link.sh: cannot create a network namespace here (needs root); run the bench without a shaped link"
  exit 0
fi
ip netns add "$ns1" && ip link add "$link0" type veth peer name "$link1" &&
  ip link set "$link0" netns "$ns0" && ip link set "$link1" netns "$ns1" &&
  ip -n "$ns0" addr add 10.78.0.1/24 dev "$link0" && ip -n "$ns1" addr add 10.78.0.2/24 dev "$link1" || exit 1
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "$link0" up && ip -n "$ns1" link set "$link1" up || exit 1
for pair in "$ns0 $link0" "$ns1 $link1"; do
  set -- $pair
  if ! ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$rate" burst 256kb latency 50ms 2>/dev/null; then
    echo "onebit_link.sh: tc's tbf qdisc is not available here; cannot shape the link"
    exit 0
  fi
done

cat >"$work/netns_rsh" <<AGENT
#!/bin/sh
host=\$1
shift
case \$host in
  10.78.0.1) ns=$ns0 ;;
  10.78.0.2) ns=$ns1 ;;
  *) echo "netns_rsh: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec \$ns sh -c "\$*"
AGENT
chmod +x "$work/netns_rsh"
printf '10.78.0.1 slots=1\n10.78.0.2 slots=1\n' >"$work/hostfile"
echo "two hosts joined by a veth pair shaped to $rate each way (tc tbf), Open MPI over TCP on it:"
ip netns exec "$ns0" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --hostfile "$work/hostfile" -np 2 --bind-to none --mca plm_rsh_agent "$work/netns_rsh" \
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 10.78.0.0/24 --mca oob_tcp_if_include 10.78.0.0/24 \
  -x LD_LIBRARY_PATH "$bench" "$steps"
