package resp

import "strings"

// subcommand checks the subcommand of a container command (CLIENT,
// SENTINEL) against subs, its served subcommands and their arities, and
// answers as Redis 7.2 does when it is not served or has the wrong number
// of arguments: "unknown subcommand 'X'. Try CONTAINER HELP." and "wrong
// number of arguments for 'container|sub' command". It returns the
// subcommand, lower case, and whether to serve it.
func (c *conn) subcommand(req *request, container string, subs map[string]int) (string, bool) {
	sub := lower(req.args[1])
	arity, ok := subs[sub]
	switch {
	case !ok:
		c.fail("unknown", errorf(prefixErr, "unknown subcommand '%s'. Try %s HELP.", clip(req.args[1]), strings.ToUpper(container)))
		return "", false
	case arity >= 0 && len(req.args) != arity, arity < 0 && len(req.args) < -arity:
		c.fail("arity", errorf(prefixErr, "wrong number of arguments for '%s|%s' command", container, sub))
		return "", false
	}
	return sub, true
}

// help writes a HELP reply: one simple string per line.
func (c *conn) help(lines []string) {
	c.w.array(len(lines))
	for _, l := range lines {
		c.w.simple(l)
	}
}
