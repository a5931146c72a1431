package resp

import (
	"context"
	"slices"
)

// command is one command the server knows.
type command struct {
	// arity as Redis reports it: the argument count including the name;
	// negative means at least -arity.
	arity int
	// flags are Redis's command flags, reported by COMMAND (clients use
	// "readonly" and "write" to route).
	flags []string
	// firstKey, lastKey and step locate the keys (COMMAND; 0: none).
	firstKey, lastKey, step int
	// noAuth: allowed before AUTH.
	noAuth bool
	// run serves the command; nil for QUIT.
	run func(ctx context.Context, c *conn, req *request)
}

func (cmd command) arityOK(n int) bool {
	if cmd.arity >= 0 {
		return n == cmd.arity
	}
	return n >= -cmd.arity
}

// commands is the command table, by lower-case name. It is filled once by
// init and never changes.
var commands map[string]command

func init() {
	commands = map[string]command{
		// connection
		"ping":    {arity: -1, flags: []string{"fast", "stale"}, run: cmdPing},
		"echo":    {arity: 2, flags: []string{"fast"}, run: cmdEcho},
		"hello":   {arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, run: cmdHello},
		"auth":    {arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, run: cmdAuth},
		"client":  {arity: -2, flags: []string{"noscript", "loading", "stale"}, run: cmdClient},
		"select":  {arity: 2, flags: []string{"loading", "stale", "fast"}, run: cmdSelect},
		"reset":   {arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true, run: cmdReset},
		"quit":    {arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"}, noAuth: true},
		"command": {arity: -1, flags: []string{"loading", "stale"}, run: cmdCommand},
		// strings
		"set":      {arity: -3, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: 1, step: 1, run: cmdSet},
		"setnx":    {arity: 3, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1, run: cmdSetNX},
		"get":      {arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, run: cmdGet},
		"mget":     {arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: -1, step: 1, run: cmdMGet},
		"mset":     {arity: -3, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: -1, step: 2, run: cmdMSet},
		"msetnx":   {arity: -3, flags: []string{"write", "denyoom"}, firstKey: 1, lastKey: -1, step: 2, run: cmdMSetNX},
		"strlen":   {arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, run: cmdStrlen},
		"getrange": {arity: 4, flags: []string{"readonly"}, firstKey: 1, lastKey: 1, step: 1, run: cmdGetRange},
		// keys
		"exists": {arity: -2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: -1, step: 1, run: cmdExists},
		"del":    {arity: -2, flags: []string{"write"}, firstKey: 1, lastKey: -1, step: 1, run: cmdDel},
		"unlink": {arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: -1, step: 1, run: cmdDel},
		"type":   {arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, run: cmdType},
		"ttl":    {arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, run: cmdTTL},
		"pttl":   {arity: 2, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1, run: cmdTTL},
		"scan":   {arity: -2, flags: []string{"readonly"}, run: cmdScan},
		"dbsize": {arity: 1, flags: []string{"readonly", "fast"}, run: cmdDBSize},
		// Redis Cluster
		"cluster":   {arity: -2, flags: []string{"stale"}, run: cmdCluster},
		"readonly":  {arity: 1, flags: []string{"loading", "stale", "fast"}, run: cmdReadonly},
		"readwrite": {arity: 1, flags: []string{"loading", "stale", "fast"}, run: cmdReadonly},
		"asking":    {arity: 1, flags: []string{"fast"}, run: cmdAsking},
		// Redis Sentinel (cmd_sentinel.go): answered before AUTH, as
		// clients ask sentinels without the master's password
		"sentinel": {arity: -2, flags: []string{"admin", "loading", "stale", "no_auth"}, noAuth: true, run: cmdSentinel},
		// server
		"info":    {arity: -1, flags: []string{"loading", "stale"}, run: cmdInfo},
		"config":  {arity: -2, flags: []string{"admin", "noscript", "loading", "stale"}, run: cmdConfig},
		"flushdb": {arity: -1, flags: []string{"write"}, run: cmdFlushDB},
	}
}

// cmdCommand answers COMMAND, COMMAND COUNT, COMMAND INFO name... and
// COMMAND DOCS [name...] (an empty document per command: enough for the
// clients that ask on connect).
func cmdCommand(_ context.Context, c *conn, req *request) {
	if len(req.args) == 1 {
		names := sortedCommands()
		c.w.array(len(names))
		for _, n := range names {
			c.writeCommandInfo(n, commands[n])
		}
		return
	}
	switch sub := lower(req.args[1]); sub {
	case "count":
		c.w.int(int64(len(commands)))
	case "info":
		names := make([]string, 0, len(req.args)-2)
		for _, a := range req.args[2:] {
			names = append(names, lower(a))
		}
		if len(names) == 0 {
			names = sortedCommands()
		}
		c.w.array(len(names))
		for _, n := range names {
			if cmd, ok := commands[n]; ok {
				c.writeCommandInfo(n, cmd)
			} else {
				c.w.null()
			}
		}
	case "docs":
		var names []string
		for _, a := range req.args[2:] {
			if _, ok := commands[lower(a)]; ok {
				names = append(names, lower(a))
			}
		}
		if len(req.args) == 2 {
			names = sortedCommands()
		}
		c.w.mapHeader(len(names))
		for _, n := range names {
			c.w.bulkString(n)
			c.w.mapHeader(0)
		}
	case "list":
		c.w.strings(sortedCommands()...)
	default:
		c.fail("syntax", errorf(prefixErr, "unknown subcommand '%s'. Try COMMAND HELP.", clip(req.args[1])))
	}
}

// writeCommandInfo writes one command's entry as Redis 7 does: name, arity,
// flags, first key, last key, step, ACL categories, tips, key
// specifications, subcommands.
func (c *conn) writeCommandInfo(name string, cmd command) {
	c.w.array(10)
	c.w.bulkString(name)
	c.w.int(int64(cmd.arity))
	c.w.setHeader(len(cmd.flags))
	for _, f := range cmd.flags {
		c.w.simple(f)
	}
	c.w.int(int64(cmd.firstKey))
	c.w.int(int64(cmd.lastKey))
	c.w.int(int64(cmd.step))
	c.w.setHeader(0)
	c.w.array(0)
	c.w.array(0)
	c.w.array(0)
}

func sortedCommands() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
