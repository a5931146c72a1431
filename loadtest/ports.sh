# Sourced by the loadtest scripts that start redis-server (compare.sh, existslease.sh, and through scratch.sh the
# Redis-protocol benchmarks), after they set $work. kvring nodes get their ports from kvnodes (nodes.sh).
#
# free_port prints a loopback port that nothing listens on over TCP or UDP and that this script has not handed
# out yet, from 10000 up to the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 by default): a
# port in that range can be taken as the source port of an outgoing connection between the check and the
# node's bind (a 64-node run, which makes thousands of connections, lost a start to that). It is called as
# $(free_port), in a subshell, so the ports handed out are kept in a file under $work rather than in a variable
# (a subshell's variables do not reach its parent).
free_port() {
	local p used="${work:?free_port needs \$work}/.ports" lo=32768
	touch "$used"
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
	[ "$lo" -gt 12000 ] || lo=60000 # an ephemeral range that starts low: fall back to the ports above 10000
	while :; do
		p=$((10000 + RANDOM % (lo - 10000)))
		grep -qx "$p" "$used" && continue
		if [ -z "$(ss -Htuan "( sport = :$p )" 2>/dev/null)" ]; then
			echo "$p" >>"$used"
			echo "$p"
			return
		fi
	done
}
