# Sourced by the loadtest scripts (fanout.sh, spread.sh) after ports.sh, from the repository's root.
#
# loadtest_init makes the work directory $work and the segment directory $shm (under SHM_ROOT, /dev/shm by
# default), builds the kvring binary into $kv, and on exit kills every pid in pids (by pid) and removes both
# directories.
#
# start_cluster NAME N MEM_MB [serve flags...] starts N nodes on loopback, node i under $work/NAME$i (data,
# socket, log) with its segment files under $shm/NAME$i ($shm: a directory the caller made under SHM_ROOT,
# /dev/shm by default, as in a deployment; segments on a disk file system such as /tmp here cost every chunk write
# a page-cache write of a disk file), with the given extra `kvring serve` flags, and waits until each node is ready and sees all N
# members active. It sets the arrays grpcs, admins and gossips (the nodes' addresses) and appends the nodes' pids
# to pids. stop_cluster ends the nodes of the last start_cluster, by pid, and waits for them.
loadtest_init() {
	work=$(mktemp -d)
	shm=$(mktemp -d "${SHM_ROOT:-/dev/shm}/kvring-loadtest-XXXXXX")
	pids=()
	trap loadtest_cleanup EXIT
	kv="$work/kvring"
	go build -o "$kv" ./cmd/kvring
}

loadtest_cleanup() {
	local pid
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$work" "$shm"
}

wait_http() {
	for _ in $(seq 400); do
		curl -sf -o /dev/null "$1" && return 0
		sleep 0.05
	done
	echo "$2 did not come up; its log:" >&2
	tail -n 30 "$work/$2.log" >&2
	return 1
}

start_cluster() {
	local name=$1 n=$2 mem=$3 i a m ready
	shift 3
	grpcs=() admins=() gossips=() cluster_pids=()
	for i in $(seq "$n"); do
		grpcs+=("127.0.0.1:$(free_port)")
		admins+=("127.0.0.1:$(free_port)")
		gossips+=("127.0.0.1:$(free_port)")
	done
	for i in $(seq "$n"); do
		local join=()
		[ "$i" -eq 1 ] || join=(--join "${gossips[0]}")
		mkdir -p "$work/$name$i" "${shm:?start_cluster needs \$shm}/$name$i"
		"$kv" serve --grpc-addr "${grpcs[i - 1]}" --admin-addr "${admins[i - 1]}" --gossip-addr "${gossips[i - 1]}" \
			--data-dir "$work/$name$i/data" --shm-dir "$shm/$name$i" --resp-addr "" --socket "$work/$name$i/kvring.sock" \
			--memory-limit "${mem}MiB" --log-level warn "${join[@]}" "$@" >>"$work/$name$i.log" 2>&1 &
		cluster_pids+=($!)
		pids+=($!)
	done
	for i in $(seq "$n"); do
		wait_http "http://${admins[i - 1]}/readyz" "$name$i"
	done
	for _ in $(seq 400); do # until every node sees every member active
		ready=0
		for a in "${admins[@]}"; do
			m=$(curl -sf "http://$a/v1/cluster" | jq '[.members[] | select(.state == "active")] | length' 2>/dev/null || echo 0)
			[ "$m" -ge "$n" ] && ready=$((ready + 1))
		done
		[ "$ready" -eq "$n" ] && return 0
		sleep 0.05
	done
	echo "the $n nodes did not all see each other" >&2
	return 1
}

stop_cluster() {
	local pid
	for pid in "${cluster_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${cluster_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	cluster_pids=()
}
