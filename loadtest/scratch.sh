# Sourced by the Redis-protocol benchmark scripts (resp-compare.sh, resp-ab.sh, resp-ab-cluster.sh,
# resp-socket.sh, resp-lmcache.sh, resp-cpu.sh, existslat.sh), from the repository's root.
#
# scratch NAME makes the run's directories, $work under /tmp and $shm under /dev/shm (kvring-NAME.XXXXXX), and an
# empty pids array, and traps EXIT, INT and TERM so that every process in pids is stopped and waited for and both
# directories are removed however the script ends. Start servers in the script's own shell (never in $(...)) and
# append their pids. It also sources ports.sh (free_port), which keeps its state under $work, and nodes.sh
# (start_nodes: kvring nodes through kvnodes, whose pid goes to pids).
scratch() {
	work=$(mktemp -d "/tmp/kvring-$1.XXXXXX")
	shm=$(mktemp -d "/dev/shm/kvring-$1.XXXXXX")
	pids=()
	trap scratch_cleanup EXIT INT TERM
}

# scratch_cleanup stops the processes in pids and removes $work and $shm.
scratch_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work" "$shm"
}

# shellcheck source=ports.sh
. loadtest/ports.sh
# shellcheck source=nodes.sh
. loadtest/nodes.sh
