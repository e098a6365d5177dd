#!/bin/sh
# Open MPI launch agent (plm_rsh_agent) for "hosts" that are network namespaces
# on this machine (multihost_netns_test.sh): mpirun calls it as it calls ssh,
#   netns_launch_agent.sh [options] HOST COMMAND...
# and it runs COMMAND (orted) through a shell inside the namespace that holds
# HOST's address. T5X_NETNS_HOSTS maps addresses to namespaces:
# "10.213.7.2=t5x-mh123-h1 ...". Like an ssh client, it stays on the calling
# host (only COMMAND enters the namespace), and when COMMAND dies of a signal
# it says so, naming HOST, and exits 255 (ssh's status for a lost connection).
while [ "${1#-}" != "$1" ]; do shift; done
host=$1
shift
for pair in $T5X_NETNS_HOSTS; do
  [ "${pair%%=*}" = "$host" ] || continue
  ip netns exec "${pair#*=}" sh -c "$*"
  status=$?
  [ $status -le 128 ] && exit $status
  echo "netns_launch_agent.sh: lost host $host (namespace ${pair#*=}): its command died of signal $((status - 128))" >&2
  exit 255
done
echo "netns_launch_agent.sh: no namespace for host '$host' in T5X_NETNS_HOSTS='$T5X_NETNS_HOSTS'" >&2
exit 255
