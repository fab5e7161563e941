# Test hosts on one machine (sourced by hosts.sh and host_faults.sh): each
# host a network namespace with one veth link to a bridge in a "switch"
# namespace, addresses 10.77.0.0/24 that exist only inside the namespaces.
# mpirun runs in host 0's namespace; its rsh agent starts the Open MPI daemon
# of every other host inside that host's namespace, so ranks on different
# hosts talk TCP over the veth links and ranks on one host shared memory.
# Needs root and CAP_SYS_ADMIN (ip netns add); the caller sets W and MPI,
# and calls hosts_usable first (exit 77, the ctest skip code, if not).
# Names carry this shell's pid ($HP), so concurrent runs never share one;
# hosts_teardown (installed as an EXIT trap by hosts_make) removes them all.

HP=sh$$ # at most 7 characters: link names are at most 15
HOSTS_NET=10.77.0

# hosts_usable: returns 0 when namespaces can be made here, else prints why
# the test skips and returns 1.
hosts_usable() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: the namespace hosts need root (uid $(id -u))"; return 1; }
  command -v ip >/dev/null || { echo "SKIP: no 'ip' (iproute2)"; return 1; }
  local err
  if ! err=$(ip netns add "${HP}probe" 2>&1); then
    echo "SKIP: 'ip netns add' refused here (no CAP_SYS_ADMIN, e.g. an unprivileged container): $err"
    return 1
  fi
  if ! err=$(ip -n "${HP}probe" link add name pa type veth peer name pb 2>&1); then
    ip netns del "${HP}probe"
    echo "SKIP: no veth links here: $err"
    return 1
  fi
  ip netns del "${HP}probe"
}

# hosts_make SLOTS...: one host per argument, h0, h1, ... (namespaces
# $HP-h0 ...), each with that many slots; writes $W/hostfile (addresses,
# slots) and $W/agent.sh (the rsh agent). Exits the test (status 1) when a
# step fails. Each host gives up a TCP connection after 5 retransmissions
# (net.ipv4.tcp_retries2, ~13 s, longer than the tests' --timeout 8 and its
# 2 s of grace; Linux's default 15 is ~15 min): with
# mpirun's keepalive (hosts_mpirun) that bounds how long mpirun waits for a
# daemon it can no longer reach.
hosts_make() {
  local n=$# i slots
  HOSTS_N=$n
  trap hosts_teardown EXIT
  ip netns add "$HP-sw" || fail "ip netns add $HP-sw"
  ip -n "$HP-sw" link add br0 type bridge && ip -n "$HP-sw" link set br0 up \
    && ip -n "$HP-sw" link set lo up || fail "bridge in $HP-sw"
  : >"$W/hostfile"
  for ((i = 0; i < n; i++)); do
    ip netns add "$HP-h$i" || fail "ip netns add $HP-h$i"
    ip link add "${HP}h${i}" netns "$HP-h$i" type veth peer name "${HP}s${i}" netns "$HP-sw" \
      || fail "veth for h$i"
    slots=${1}; shift
    ip netns exec "$HP-h$i" sh -c 'echo 5 >/proc/sys/net/ipv4/tcp_retries2' \
      || fail "tcp_retries2 in h$i"
    ip -n "$HP-h$i" link set lo up && ip -n "$HP-h$i" link set "${HP}h${i}" up \
      && ip -n "$HP-h$i" addr add "$HOSTS_NET.$((i + 1))/24" dev "${HP}h${i}" \
      && ip -n "$HP-sw" link set "${HP}s${i}" master br0 up || fail "link of h$i"
    echo "$HOSTS_NET.$((i + 1)) slots=$slots" >>"$W/hostfile"
  done
  hosts_agent >"$W/agent.sh" && chmod +x "$W/agent.sh" || fail "agent"
}

# The rsh agent mpirun calls as `agent.sh [options] HOST COMMAND...`: runs
# COMMAND in HOST's namespace (HOST an address of the hostfile), under its
# own host name (a UTS namespace): Open MPI names its shared-memory segments
# after the host name and the local rank, so hosts that shared one name
# would map each other's segments (vader crashed so).
hosts_agent() {
  echo '#!/usr/bin/env bash'
  echo 'while [ "${1#-}" != "$1" ]; do shift; done # ssh options, if any'
  echo 'case $1 in'
  local i
  for ((i = 0; i < HOSTS_N; i++)); do echo "  $HOSTS_NET.$((i + 1))) ns=$HP-h$i ;;"; done
  echo '  *) echo "agent: unknown host $1" >&2; exit 255 ;;'
  echo 'esac'
  # exec all the way down: mpirun's child is the daemon itself, so a killed
  # host is a daemon lost (hosts_mpirun's --noprefix keeps COMMAND one command).
  echo 'shift; exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns && exec $*"'
}

# hosts_mpirun NP ARGS...: mpirun in h0's namespace over the hostfile: the
# daemons over the veth addresses, TCP between hosts, shared memory (vader)
# within one (HOSTS_BTL overrides the transports). The daemons' connections
# probe an idle peer after 15 s (then 3 probes 1 s apart), later than the
# tests' collective deadline (--timeout 8), so a lost host is first reported
# by the ranks; without it mpirun waits for a cut-off daemon for minutes.
# --noprefix: mpirun named by its full path would otherwise put "PATH=...;
# export PATH; ..." before the daemon's command.
hosts_mpirun() {
  local np=$1; shift
  ip netns exec "$HP-h0" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$HP-h0" \
    "$MPI" --allow-run-as-root --oversubscribe --noprefix -np "$np" \
    --hostfile "$W/hostfile" --mca plm_rsh_agent "$W/agent.sh" \
    --mca oob_tcp_if_include "$HOSTS_NET.0/24" --mca oob_tcp_keepalive_time 15 \
    --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 \
    --mca btl "${HOSTS_BTL:-tcp,self,vader}" \
    --mca btl_tcp_if_include "$HOSTS_NET.0/24" "$@"
}

# host_pids I: the processes in host I's namespace.
host_pids() { ip netns pids "$HP-h$1"; }

# host_link I up|down: host I's link at the switch.
host_link() { ip -n "$HP-sw" link set "${HP}s$1" "$2"; }

# Kills what still runs in the test's namespaces and removes them.
hosts_teardown() {
  local ns
  for ns in $(ip netns list | awk -v p="$HP-" 'index($1, p) == 1 {print $1}'); do
    ip netns pids "$ns" | xargs -r kill -KILL 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
}
