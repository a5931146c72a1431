# Sourced by the loadtest scripts, from the repository's root, after they set $work and $kv (the kvring binary; a
# -kvring option given to start_nodes overrides it).
#
# start_nodes ENV [kvnodes options...] [-- serve flags...] starts kvring nodes through kvnodes
# (internal/launch/cmd/kvnodes: ports the kernel picks, each node with its own data, socket and segment
# directories, joined to the first, ready and seeing each other; see its doc for the options) in the background,
# appends its pid to pids and nodes_pid, waits until it writes the file ENV and sources it: that sets the arrays
# grpcs, admins, gossips, resps, sockets, ids, node_pids, logs, data_dirs and shm_dirs (index 0: the first node).
# It fails, with kvnodes' error (which quotes the node's log), when kvnodes exits first. Killing nodes_pid (as
# the scripts' clean-up does with every pid in pids) stops the nodes (SIGTERM, then SIGKILL after 30 s) and
# removes their directories; so does the script's death, however it dies (kvnodes dies with its parent).
#
# kvnodes is built into $work once (not `go run`: killing `go run` would leave the command it started running).
start_nodes() {
	local env=$1
	shift
	[ -x "$work/kvnodes" ] || go build -o "$work/kvnodes" ./internal/launch/cmd/kvnodes
	rm -f "$env"
	nodes_env=$env
	"$work/kvnodes" -kvring "${kv:-}" -env "$env" "$@" </dev/null &
	nodes_pid=$!
	pids+=("$nodes_pid")
	while [ ! -e "$env" ]; do
		kill -0 "$nodes_pid" 2>/dev/null || { wait "$nodes_pid" || true; echo "kvnodes did not start the nodes" >&2; return 1; }
		sleep 0.05
	done
	# shellcheck disable=SC1090
	. "$env"
}

# nodes_ctl COMMAND I [FLAG...] runs a command on node I (from 1) of the last start_nodes and returns once it is
# done: stop (SIGTERM; it fails when the node does not exit 0 within kvnodes' -stop-timeout, 30 s by default), kill
# (SIGKILL), pause (SIGSTOP), continue (SIGCONT) or restart (on its directories, addresses and flags, and FLAGs
# for this start; it returns once the node is ready again). The
# node's ports stay held while it is down. Then it sources the env file again (node_pids changes on a restart).
nodes_ctl() {
	"$work/kvnodes" ctl "${kv_control:?nodes_ctl needs start_nodes}" "$@" || return 1
	# shellcheck disable=SC1090
	. "$nodes_env"
}

# stop_nodes stops the nodes of the last start_nodes (by kvnodes' pid) and waits until they are gone.
stop_nodes() {
	kill "$nodes_pid" 2>/dev/null || true
	wait "$nodes_pid" 2>/dev/null || true
}
