# Sourced by the loadtest scripts (fanout.sh, spread.sh), from the repository's root.
#
# loadtest_init makes the work directory $work and the segment directory $shm (under SHM_ROOT, /dev/shm by
# default), builds the kvring binary into $kv, and on exit kills every pid in pids (by pid) and removes both
# directories.
#
# start_cluster NAME N MEM_MB [serve flags...] starts N nodes on loopback through kvnodes (start_nodes, nodes.sh),
# node i under $work/NAME/n$i (data, socket, log) with its segment files under $shm/NAME ($shm: a directory the
# caller made under SHM_ROOT, /dev/shm by default, as in a deployment; segments on a disk file system such as /tmp
# here cost every chunk write a page-cache write of a disk file), with the given extra `kvring serve` flags, and
# waits until each node is ready and sees all N members active. It sets the arrays grpcs, admins and gossips (the
# nodes' addresses; and the others start_nodes sets) and appends kvnodes' pid to pids. stop_cluster ends the
# nodes of the last start_cluster and waits for them. The array cluster_opts, if set, holds more kvnodes options
# (e.g. -stop-timeout 10m).
loadtest_init() {
	work=$(mktemp -d)
	shm=$(mktemp -d "${SHM_ROOT:-/dev/shm}/kvring-loadtest-XXXXXX")
	pids=() cluster_opts=()
	trap loadtest_cleanup EXIT
	kv="$work/kvring"
	go build -o "$kv" ./cmd/kvring
}

# shellcheck source=loadtest/nodes.sh
. loadtest/nodes.sh

loadtest_cleanup() {
	local pid
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$work" "$shm"
}

start_cluster() {
	local name=$1 n=$2 mem=$3
	shift 3
	mkdir -p "$work/$name" "${shm:?start_cluster needs \$shm}/$name"
	start_nodes "$work/$name.env" -n "$n" -dir "$work/$name" -shm-root "$shm/$name" -memory-limit "${mem}MiB" -socket \
		"${cluster_opts[@]}" -- --log-level warn "$@"
}

stop_cluster() {
	stop_nodes
}
