# Sourced by the loadtest scripts (compare.sh, fanout.sh, join.sh, spread.sh), after they set $work.
#
# free_port prints a loopback port (20000-59999) that nothing listens on over TCP or UDP and that this script
# has not handed out yet. It is called as $(free_port), in a subshell, so the ports handed out are kept in a
# file under $work rather than in a variable (a subshell's variables do not reach its parent).
free_port() {
	local p used="${work:?free_port needs \$work}/.ports"
	touch "$used"
	while :; do
		p=$((20000 + RANDOM % 40000))
		grep -qx "$p" "$used" && continue
		if [ -z "$(ss -Htuan "( sport = :$p )" 2>/dev/null)" ]; then
			echo "$p" >>"$used"
			echo "$p"
			return
		fi
	done
}
